import { priceSourceFor } from '../catalogue/prices';
import { ChainParams } from '../catalogue/schemas';
import { findChain } from '../catalogue/service';
import type { RouteRegistry } from '../http/route';
import { presentNetworkFee, readFeeMarket } from './fees';
import { passThrough } from './json-rpc';
import { custodySenderAmong } from '../transactions/raw-broadcasts';
import { JsonRpcAnswer, JsonRpcBody, NetworkFeeObject } from './schemas';

export function registerChainRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'get',
    path: '/v1/chains/:chain/fees',
    operationId: 'getNetworkFees',
    summary: 'Network fees',
    description:
      "The chain's fee market for the key's environment, read from its node: low, medium and high tiers, exact decimal strings. " +
      'Answers 503 `chain_node_unavailable` (details.reason: not_configured, network_mismatch, token_mismatch or unreachable) when no usable node serves the chain.',
    tag: 'Chains',
    scope: 'custody:read',
    params: ChainParams,
    response: { status: 200, description: 'The network fee tiers', schema: NetworkFeeObject },
    handler: async ({ params, auth, deps }) => {
      const chain = findChain(params.chain).id;
      return { body: presentNetworkFee(chain, await readFeeMarket(deps.chains, chain, auth.environment), priceSourceFor(deps.config, auth.environment)) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/rpc/:chain',
    operationId: 'callJsonRpc',
    summary: 'JSON-RPC 2.0 pass-through',
    description:
      "Relays a JSON-RPC 2.0 request or batch to the node of the key's environment, for the methods the chain's allowlist names. " +
      'Protocol errors are JSON-RPC error objects with HTTP 200 (-32700, -32600, -32601, -32602, -32603); a request of notifications only answers 204 with no body. ' +
      'A broadcast spending from a custody address is answered -32003 naming POST /v1/transactions and never relayed; one whose bytes are no signed transaction, -32602. ' +
      'Authentication, scope and rate limits answer in the REST envelope first. See docs/chains.md.',
    tag: 'Chains',
    scope: 'rpc:call',
    params: ChainParams,
    rawJsonBody: { documentedAs: JsonRpcBody },
    // Reads only (the custody check of a broadcast): the node call must not hold a transaction open.
    ownTransactions: true,
    response: { status: 200, description: 'A JSON-RPC response object, or an array of them for a batch', schema: JsonRpcAnswer },
    handler: async ({ params, rawBody, auth, deps, em }) => {
      const chain = findChain(params.chain).id;
      const answer = await passThrough(rawBody, chain, {
        environment: auth.environment,
        resolveProvider: () => deps.chains.provider(chain, auth.environment),
        custodySender: (senders) => custodySenderAmong(em, chain, auth.environment, senders),
      });
      return answer === undefined ? { status: 204, body: null } : { body: answer };
    },
  });
}
