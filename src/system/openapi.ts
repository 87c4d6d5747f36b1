import { OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { RouteRegistry } from '../http/route';
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
