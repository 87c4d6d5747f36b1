import { priceSourceFor } from '../catalogue/prices';
import { ChainParams } from '../catalogue/schemas';
import { findChain } from '../catalogue/service';
import type { RouteRegistry } from '../http/route';
import { presentNetworkFee, readFeeMarket } from './fees';
import { DomainError } from '../shared/errors';
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
      'Answers 503 `chain_node_unavailable` (details.reason: not_configured, network_mismatch, token_mismatch, unreachable, or checking: a node not yet checked, try again shortly) when no usable node serves the chain.',
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
      'Authentication, scope and rate limits answer in the REST envelope first, and so does 429 `rate_limited` (Retry-After) when the organization already has RPC_CONCURRENCY_PER_ORGANIZATION requests in flight on the server. ' +
      'eth_getLogs needs a bounded block range (RPC_LOG_RANGE_MAX_BLOCKS), getblock a verbosity of 0 or 1 (else -32602); a batch has a cost budget (RPC_BATCH_MAX_COST, else -32600); a node answer over CHAIN_NODE_MAX_RESPONSE_BYTES is -32005. See docs/chains.md.',
    tag: 'Chains',
    scope: 'rpc:call',
    params: ChainParams,
    rawJsonBody: { documentedAs: JsonRpcBody },
    // Reads only (the custody check of a broadcast), each on a pooled connection taken and given back: the node call holds none.
    ownTransactions: true,
    response: { status: 200, description: 'A JSON-RPC response object, or an array of them for a batch', schema: JsonRpcAnswer },
    handler: async ({ params, rawBody, auth, deps, em }) => {
      const chain = findChain(params.chain).id;
      const { config } = deps;
      const relayed = await deps.rpcConcurrency.run(`${auth.organizationId}:${auth.environment}`, () =>
        passThrough(rawBody, chain, {
          environment: auth.environment,
          resolveProvider: () => deps.chains.provider(chain, auth.environment),
          custodySender: (senders) => custodySenderAmong(em, chain, auth.environment, senders),
          limits: { batchMaxCost: config.RPC_BATCH_MAX_COST, logRangeMaxBlocks: config.RPC_LOG_RANGE_MAX_BLOCKS },
        }),
      );
      if (!relayed.ran) {
        throw new DomainError({
          kind: 'rate_limited',
          code: 'rate_limited',
          message: `This organization already has ${config.RPC_CONCURRENCY_PER_ORGANIZATION} JSON-RPC requests in flight on this server in this environment: retry once one has answered.`,
          details: { retry_after_seconds: 1 },
        });
      }
      const answer = relayed.result;
      return answer === undefined ? { status: 204, body: null } : { body: answer };
    },
  });
}
