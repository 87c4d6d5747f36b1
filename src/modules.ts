import { registerAddressBookRoutes } from './address-book/routes';
import { registerApiKeyRoutes } from './api-keys/routes';
import { registerAutomationRoutes } from './automations/routes';
import { registerBalanceRoutes } from './balances/routes';
import { registerCardRoutes } from './cards/routes';
import { registerCatalogueRoutes } from './catalogue/routes';
import { registerChainRoutes } from './chains/routes';
import { registerConsolidationRoutes } from './consolidation/routes';
import { registerCustodyRoutes } from './custody/routes';
import { registerEventRoutes } from './events/routes';
import { registerGasStationRoutes } from './gas-stations/routes';
import type { RouteModule } from './http/app';
import { registerLightningRoutes } from './lightning/routes';
import { registerMonitoringRoutes } from './monitoring/routes';
import { registerOrganizationRoutes } from './organizations/routes';
import { registerPayoutRoutes } from './payouts/routes';
import { registerGovernanceRoutes } from './policies/governance-routes';
import { registerPolicyRoutes } from './policies/routes';
import { registerSystemRoutes } from './system/routes';
import { registerTransactionRoutes } from './transactions/routes';

/** Every domain's routes; a new domain adds its `register...Routes` here. */
export const routeModules: RouteModule[] = [
  registerSystemRoutes,
  registerApiKeyRoutes,
  registerOrganizationRoutes,
  registerCatalogueRoutes,
  registerChainRoutes,
  registerBalanceRoutes,
  registerCustodyRoutes,
  registerTransactionRoutes,
  registerGasStationRoutes,
  registerAddressBookRoutes,
  registerConsolidationRoutes,
  registerAutomationRoutes,
  registerMonitoringRoutes,
  registerEventRoutes,
  registerPolicyRoutes,
  registerGovernanceRoutes,
  registerLightningRoutes,
  registerCardRoutes,
  registerPayoutRoutes,
];
