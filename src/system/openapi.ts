import { OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { RouteModule } from '../http/app';
import type { AppDeps } from '../http/context';
import { RouteRegistry } from '../http/route';
import { LATEST_API_VERSION } from '../shared/api-versions';

/** The OpenAPI 3.1 document, generated from the zod schemas the routes validate with. */
export function buildOpenApiDocument(routes: RouteRegistry) {
  const generator = new OpenApiGeneratorV31(routes.openapi.definitions);
  return generator.generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Custody, Card, Lightning and Payout Service',
      version: LATEST_API_VERSION,
      description:
        'Custody wallets, gas stations, policies, consolidation, monitoring and webhooks, API keys, JSON-RPC, ' +
        'USD cards, Lightning and crypto-to-fiat payouts. Authenticate with `Authorization: Bearer <secret>`; ' +
        'select a version with the `Api-Version` header.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: '/' }],
  });
}

/**
 * The same document built without a running service, for the build's typed client
 * (scripts/openapi-types.cjs). Registering routes reads no dependency (only handlers do, and none
 * runs here), so any read of one fails loudly rather than yielding a half-built document.
 */
export function buildOpenApiDocumentOf(modules: RouteModule[]) {
  const noDeps = new Proxy({} as AppDeps, {
    get: (_, name) => {
      throw new Error(`registering routes read deps.${String(name)}: the OpenAPI document must not depend on it`);
    },
  });
  const routes = new RouteRegistry(noDeps);
  for (const register of modules) register(routes);
  return buildOpenApiDocument(routes);
}
