import { registerAddressBookRoutes } from './address-book/routes';
import { registerApiKeyRoutes } from './api-keys/routes';
import { registerAutomationRoutes } from './automations/routes';
import { registerBalanceRoutes } from './balances/routes';
import { companyBalanceProjection } from './balances/service';
import { cardSecretsColumn } from './cards/issuer';
import { cardBalanceProjection } from './cards/ledger';
import { registerCardRoutes } from './cards/routes';
import { registerCatalogueRoutes } from './catalogue/routes';
import { registerChainRoutes } from './chains/routes';
import { registerConsolidationRoutes } from './consolidation/routes';
import { custodyBalanceProjection } from './custody/journal';
import { registerCustodyRoutes } from './custody/routes';
import { registerEventRoutes } from './events/routes';
import { signingSecretColumns } from './events/secrets';
import { registerGasStationRoutes } from './gas-stations/routes';
import type { RouteModule } from './http/app';
import { idempotentResponseColumn } from './idempotency/service';
import type { SealedColumn } from './keys/rotation';
import { organizationSeedColumn } from './keys/seed-column';
import type { ProjectionCheck } from './ledger/invariants';
import { nodeKeyColumn } from './lightning/node-key';
import { registerLightningRoutes } from './lightning/routes';
import { registerMonitoringRoutes } from './monitoring/routes';
import { registerOrganizationRoutes } from './organizations/routes';
import { beneficiaryColumn } from './payouts/beneficiaries';
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

/** Every domain's balance rows kept as projections of the ledger; a domain that keeps one adds its check here. */
export const ledgerProjections: ProjectionCheck[] = [custodyBalanceProjection, companyBalanceProjection, cardBalanceProjection];

/**
 * Every column holding a data key wrapped under a master key, for `keys:rotate`; a domain that seals
 * something new (src/keys/envelope.ts, KeyService.seal, its own wrapping) declares its column and adds it here.
 */
export const sealedColumns: SealedColumn[] = [organizationSeedColumn, nodeKeyColumn, ...signingSecretColumns, cardSecretsColumn, beneficiaryColumn, idempotentResponseColumn];
