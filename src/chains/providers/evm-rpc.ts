import { createPublicClient, http, type PublicClient } from 'viem';
import { z } from 'zod';
import type { ChainId } from '../../catalogue/service';
import {
  NodeUnavailableError,
  type ChainProvider,
  type FeeMarket,
  type NetworkIdentity,
  type RelayedAnswer,
  type RelayedCall,
} from '../provider';

/** Blocks of history the fee market is read from, and the tip percentile each level offers. */
const FEE_HISTORY_BLOCKS = 20;
const PRIORITY_PERCENTILES = { low: 10, medium: 50, high: 90 } as const;

const JsonRpcErrorObject = z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() });
const NodeResponse = z.object({ id: z.union([z.number(), z.string(), z.null()]), error: JsonRpcErrorObject.optional() }).loose();
const NodeReply = z.union([NodeResponse, z.array(NodeResponse)]);
type NodeResponse = z.infer<typeof NodeResponse>;

/** Any Ethereum JSON-RPC node (geth, reth, anvil, a hosted provider), for one chain and environment. */
export class EvmRpcProvider implements ChainProvider {
  readonly kind = 'evm-rpc';
  private readonly client: PublicClient;

  constructor(
    readonly chain: ChainId,
    private readonly url: string,
    private readonly timeoutMs: number,
  ) {
    // Retries belong to the caller: a pass-through call must not be sent twice behind its back.
    this.client = createPublicClient({ transport: http(url, { timeout: timeoutMs, retryCount: 0 }) });
  }

  async identifyNetwork(): Promise<NetworkIdentity> {
    return { chainId: await this.safely('eth_chainId', () => this.client.getChainId()) };
  }

  async feeMarket(): Promise<FeeMarket> {
    const percentiles = [PRIORITY_PERCENTILES.low, PRIORITY_PERCENTILES.medium, PRIORITY_PERCENTILES.high];
    const history = await this.safely('eth_feeHistory', () =>
      this.client.getFeeHistory({ blockCount: FEE_HISTORY_BLOCKS, blockTag: 'latest', rewardPercentiles: percentiles }),
    );
    // The last entry is the base fee of the block after the newest one: the one a transaction now pays.
    const baseFeePerGas = history.baseFeePerGas.at(-1) ?? 0n;
    const rewards = history.reward ?? [];
    const tipAt = (column: number) => median(rewards.map((block) => block[column] ?? 0n));
    return { model: 'eip1559', baseFeePerGas, priorityFeePerGas: { low: tipAt(0), medium: tipAt(1), high: tipAt(2) } };
  }

  async relay(calls: RelayedCall[]): Promise<RelayedAnswer[]> {
    // Our own ids (the call's index): the caller's ids may repeat within a batch, and notifications have none.
    const requests = calls.map((call, index) => ({ jsonrpc: '2.0', id: index, method: call.method, ...(call.params === undefined ? {} : { params: call.params }) }));
    const reply = await this.post(requests.length === 1 ? requests[0] : requests);
    const parsed = NodeReply.safeParse(reply);
    if (!parsed.success) throw new NodeUnavailableError('The node sent a reply that is not JSON-RPC.');
    if (!Array.isArray(parsed.data)) {
      // A single answer: to the single call, or the node's refusal of the whole batch.
      const only = parsed.data;
      return calls.map((_, index) => (calls.length === 1 || only.error ? toAnswer(only) : missingAnswer(index)));
    }
    const byId = new Map(parsed.data.map((response) => [response.id, response]));
    return calls.map((_, index) => {
      const response = byId.get(index);
      return response ? toAnswer(response) : missingAnswer(index);
    });
  }

  private async post(payload: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(payload),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      const timedOut = (error as Error).name === 'TimeoutError';
      throw new NodeUnavailableError(timedOut ? `The node did not answer within ${this.timeoutMs} ms.` : 'The node could not be reached.');
    }
    const text = await response.text().catch(() => '');
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new NodeUnavailableError(`The node answered HTTP ${response.status} without a JSON-RPC body.`);
    }
  }

  /** Runs a typed viem call; its errors name the URL, so they are replaced by a safe one. */
  private async safely<T>(method: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch {
      throw new NodeUnavailableError(`The node did not answer ${method}.`);
    }
  }
}

function toAnswer(response: NodeResponse): RelayedAnswer {
  if (response.error) return { error: response.error };
  if (!Object.hasOwn(response, 'result')) return { error: { code: -32603, message: 'The node answered with neither a result nor an error.' } };
  return { result: response.result };
}

const missingAnswer = (index: number): RelayedAnswer => ({
  error: { code: -32603, message: `The node sent no answer to call ${index} of the batch.` },
});

/** The middle value (the lower of the two middles for an even count); 0 when there is none. */
function median(values: bigint[]): bigint {
  if (values.length === 0) return 0n;
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}
