import type { RouteRegistry } from '../http/route';
import { estimateFee } from './estimate';
import { EstimateFeeBody, FeeEstimation } from './schemas';

const TAG = 'Transactions';

export function registerTransactionRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/v1/transactions/estimate-fee',
    operationId: 'estimateTransactionFee',
    summary: 'Estimate transaction fee',
    description:
      "The fee of a send at low, medium and high from the chain's fee market, in the chain's native asset, with what the recipient gets and the wallet gives (net, or gross with treat_as_gross_amount). " +
      'Validates like a send: 404 for a wallet not of the key, 400 with param for an asset, address or amount that does not fit the chain; ' +
      '503 `chain_node_unavailable` when no usable node serves the chain. See docs/transactions.md.',
    tag: TAG,
    scope: 'custody:read',
    body: EstimateFeeBody,
    response: { status: 200, description: 'The fee estimation', schema: FeeEstimation },
    handler: async ({ auth, em, body, deps }) => ({ body: await estimateFee(em, deps.config, deps.chains, auth, body) }),
  });
}
