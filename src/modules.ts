import { registerApiKeyRoutes } from './api-keys/routes';
import { registerCatalogueRoutes } from './catalogue/routes';
import type { RouteModule } from './http/app';
import { registerOrganizationRoutes } from './organizations/routes';
import { registerPolicyRoutes } from './policies/routes';
import { registerSystemRoutes } from './system/routes';

/** Every domain's routes; a new domain adds its `register...Routes` here. */
export const routeModules: RouteModule[] = [
  registerSystemRoutes,
  registerApiKeyRoutes,
  registerOrganizationRoutes,
  registerCatalogueRoutes,
  registerPolicyRoutes,
];
