import type { RouteRegistry } from '../http/route';
import { listEnvelopeSchema } from '../shared/schemas';
import { AssetObject, AssetQuery, catalogueList, ChainObject, ChainParams } from './schemas';
import { ASSETS, CHAINS, findChain, presentAsset, presentChain } from './service';

export function registerCatalogueRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'get',
    path: '/v1/chains',
    operationId: 'listChains',
    summary: 'List supported chains',
    tag: 'Catalogue',
    scope: 'custody:read',
    response: { status: 200, description: 'Every supported chain', schema: listEnvelopeSchema(ChainObject) },
    handler: async ({ auth }) => ({ body: catalogueList(CHAINS.map((chain) => presentChain(chain, auth.environment))) }),
  });

  routes.add({
    method: 'get',
    path: '/v1/chains/:chain',
    operationId: 'getChain',
    summary: 'Get one chain',
    tag: 'Catalogue',
    scope: 'custody:read',
    params: ChainParams,
    response: { status: 200, description: 'The chain', schema: ChainObject },
    handler: async ({ auth, params }) => ({ body: presentChain(findChain(params.chain), auth.environment) }),
  });

  for (const path of ['/assets', '/v1/assets']) {
    routes.add({
      method: 'get',
      path,
      operationId: path === '/assets' ? 'listAssetsCatalogue' : 'listAssets',
      summary: 'List supported assets with their decimals',
      tag: 'Catalogue',
      scope: 'custody:read',
      query: AssetQuery,
      response: { status: 200, description: 'Every supported asset, optionally of one chain', schema: listEnvelopeSchema(AssetObject) },
      handler: async ({ query }) => ({
        body: catalogueList(ASSETS.filter((asset) => !query.chain || asset.chain === query.chain).map(presentAsset)),
      }),
    });
  }
}
