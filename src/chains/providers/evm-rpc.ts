import {
  BaseError,
  BlockNotFoundError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  createPublicClient,
  erc20Abi,
  getAddress,
  http,
  keccak256,
  parseAbi,
  parseEventLogs,
  RpcRequestError,
  TransactionReceiptNotFoundError,
  type PublicClient,
} from 'viem';
import type { ChainId } from '../../catalogue/service';
import {
  NodeUnavailableError,
  TransactionRejectedError,
  type ChainProvider,
  type BalanceRead,
  type ChainTip,
  type FeeMarket,
  type GasEstimateCall,
  type NetworkIdentity,
  type ObservedBlock,
  type ObservedPayment,
  type ObservedTransfer,
  type RelayedAnswer,
  type RelayedCall,
  type TransactionStatus,
} from '../provider';
import { broadcastErrorOutcome, evmRefusalReason } from '../refusals';
import { EvmBalanceReader } from './evm-balances';
import { nodeFetch, relayJsonRpc2, relayJsonRpc2WithStatus, type NodeCallLimits } from './node-http';

/** The ERC-20 contract of each token asset on this node's network: asset id → contract address. */
export type TokenContracts = Readonly<Record<string, `0x${string}`>>;

/** The chain id of Ethereum mainnet, the only network live keys accept (and live prices, unless they are read on an L2). */
export const ETHEREUM_MAINNET_CHAIN_ID = 1;

/** A Chainlink feed's latest round as read (`latestRoundData`): its integer answer, when the round started and was last updated (seconds since the epoch). */
export interface FeedRound {
  answer: bigint;
  startedAt: bigint;
  updatedAt: bigint;
}

/** A price feed's round with the feed's decimals and its aggregator's bounds (`minAnswer`, `maxAnswer`), all in the feed's integer units. */
export interface PriceRound extends FeedRound {
  decimals: number;
  minAnswer: bigint;
  maxAnswer: bigint;
}

/**
 * The parts of Chainlink's contracts a price read needs: the proxy's AggregatorV3Interface and the
 * address of the aggregator behind it, whose answer bounds are immutables of the aggregator only.
 */
const aggregatorV3Abi = parseAbi([
  'function decimals() view returns (uint8)',
  'function latestRoundData() view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)',
  'function aggregator() view returns (address)',
  'function minAnswer() view returns (int192)',
  'function maxAnswer() view returns (int192)',
]);

/** Blocks of history the fee market is read from, and the tip percentile each level offers. */
const FEE_HISTORY_BLOCKS = 20;
const PRIORITY_PERCENTILES = { low: 10, medium: 50, high: 90 } as const;


/** Any Ethereum JSON-RPC node (geth, reth, anvil, a hosted provider), for one chain and environment. */
export class EvmRpcProvider implements ChainProvider {
  readonly kind = 'evm-rpc';
  private readonly client: PublicClient;

  private readonly assetOfContract: Map<string, string>;
  private readonly balanceReader: EvmBalanceReader;

  constructor(
    readonly chain: ChainId,
    private readonly url: string,
    private readonly limits: NodeCallLimits,
    private readonly tokens: TokenContracts = {},
  ) {
    // Retries belong to the caller: a pass-through call must not be sent twice behind its back.
    const fetchFn = (input: string | URL | Request, init?: RequestInit) => nodeFetch(input, init ?? {}, limits.maxResponseBytes);
    this.client = createPublicClient({ transport: http(url, { timeout: limits.timeoutMs, retryCount: 0, fetchFn }) });
    this.assetOfContract = new Map(Object.entries(tokens).map(([assetId, contract]) => [contract.toLowerCase(), assetId]));
    this.balanceReader = new EvmBalanceReader(tokens, (calls) => this.relay(calls));
  }

  async tip(): Promise<ChainTip> {
    const block = await this.safely('eth_getBlockByNumber', () => this.client.getBlock({ blockTag: 'latest' }));
    return { height: Number(block.number), hash: block.hash };
  }

  /**
   * Ether sent by a transaction's own value (position `native`, only when its receipt succeeded:
   * a reverted call moves nothing), the Transfer events of the configured token contracts
   * (`log:<index>`), and every transaction's sender with the fee its receipt says it paid (reverted
   * or not). Ether moved by contract-internal calls is not seen: that needs tracing.
   */
  async block(height: number): Promise<ObservedBlock | null> {
    let block;
    try {
      block = await this.client.getBlock({ blockNumber: BigInt(height), includeTransactions: true });
    } catch (error) {
      if (error instanceof BlockNotFoundError) return null;
      throw new NodeUnavailableError('The node did not answer eth_getBlockByNumber.');
    }
    const transfers: ObservedTransfer[] = [];
    const payments: ObservedPayment[] = [];
    if (block.transactions.length) {
      const receipts = await this.safely('eth_getBlockReceipts', () => this.client.request({ method: 'eth_getBlockReceipts', params: [block.hash] }));
      const receiptOf = new Map((receipts ?? []).map((receipt) => [receipt.transactionHash, receipt]));
      for (const transaction of block.transactions) {
        const receipt = receiptOf.get(transaction.hash);
        if (!receipt) throw new NodeUnavailableError(`The node's block receipts miss transaction ${transaction.hash}.`);
        const from = getAddress(transaction.from);
        payments.push({ txid: transaction.hash, from, fee: BigInt(receipt.gasUsed) * BigInt(receipt.effectiveGasPrice), nonce: BigInt(transaction.nonce) });
        if (transaction.to && transaction.value > 0n && receipt.status === '0x1') {
          transfers.push({ txid: transaction.hash, position: 'native', to: getAddress(transaction.to), from, assetId: 'ETH', amount: transaction.value });
        }
      }
    }
    const contracts = Object.values(this.tokens);
    if (contracts.length) {
      const logs = await this.safely('eth_getLogs', () => this.client.request({ method: 'eth_getLogs', params: [{ blockHash: block.hash, address: contracts }] }));
      for (const log of parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: logs as never, strict: true })) {
        const assetId = this.assetOfContract.get(log.address.toLowerCase());
        if (!assetId || log.removed) continue;
        transfers.push({
          txid: log.transactionHash,
          position: `log:${log.logIndex}`,
          to: getAddress(log.args.to),
          from: getAddress(log.args.from),
          assetId,
          amount: log.args.value,
        });
      }
    }
    return { height, hash: block.hash, parentHash: block.parentHash, time: new Date(Number(block.timestamp) * 1000), transfers, payments, inputs: [] };
  }

  async balance(address: string, assetId: string): Promise<bigint> {
    const owner = getAddress(address);
    if (assetId === 'ETH') return this.safely('eth_getBalance', () => this.client.getBalance({ address: owner }));
    const contract = this.tokens[assetId];
    if (!contract) throw new NodeUnavailableError(`No ${assetId} contract is configured for this node.`);
    return this.safely('eth_call', () => this.client.readContract({ address: contract, abi: erc20Abi, functionName: 'balanceOf', args: [owner] }));
  }

  balancesAt(reads: BalanceRead[], block: ChainTip): Promise<bigint[]> {
    return this.balanceReader.balancesAt(reads, block);
  }

  /** The node's error is judged by src/chains/refusals.ts: only a definite refusal (nonce too low, underpriced...) is one; its message names no URL. */
  async broadcast(rawTransaction: string): Promise<{ txid: string }> {
    const { status, answers } = await relayJsonRpc2WithStatus(this.url, [{ method: 'eth_sendRawTransaction', params: [rawTransaction] }], this.limits);
    const [answer] = answers;
    if ('error' in answer!) return broadcastErrorOutcome('ethereum', answer.error, status, () => keccak256(rawTransaction as `0x${string}`));
    if (typeof answer!.result !== 'string') throw new NodeUnavailableError('The node answered eth_sendRawTransaction without a hash.');
    return { txid: answer!.result };
  }

  async transactionStatus(txid: string): Promise<TransactionStatus> {
    const hash = txid as `0x${string}`;
    try {
      const receipt = await this.client.getTransactionReceipt({ hash });
      const tip = await this.tip();
      const blockHeight = Number(receipt.blockNumber);
      return {
        state: 'mined',
        blockHeight,
        blockHash: receipt.blockHash,
        confirmations: tip.height - blockHeight + 1,
        succeeded: receipt.status === 'success',
        fee: receipt.gasUsed * receipt.effectiveGasPrice,
      };
    } catch (error) {
      if (!(error instanceof TransactionReceiptNotFoundError)) throw new NodeUnavailableError('The node did not answer eth_getTransactionReceipt.');
    }
    const pending = await this.safely('eth_getTransactionByHash', () => this.client.request({ method: 'eth_getTransactionByHash', params: [hash] }));
    return pending ? { state: 'pending' } : { state: 'unknown' };
  }

  tokenAddress(assetId: string): string | undefined {
    return this.tokens[assetId];
  }

  /**
   * Each configured token contract's `decimals()` (eth_call at the tip); null for an address that
   * answers none (no code there, or a contract without it). A node that does not answer is unavailable.
   */
  async tokenDecimals(): Promise<{ assetId: string; contract: string; decimals: number | null }[]> {
    return Promise.all(
      Object.entries(this.tokens).map(async ([assetId, contract]) => {
        try {
          return { assetId, contract, decimals: await this.client.readContract({ address: contract, abi: erc20Abi, functionName: 'decimals' }) };
        } catch (error) {
          const unanswered = error instanceof BaseError && error.walk((cause) => cause instanceof ContractFunctionZeroDataError || cause instanceof ContractFunctionRevertedError);
          if (unanswered) return { assetId, contract, decimals: null };
          throw new NodeUnavailableError('The node did not answer eth_call.');
        }
      }),
    );
  }

  /** A Chainlink feed's latest round (`latestRoundData`, an eth_call at the tip): a price feed's or the sequencer uptime feed's. */
  async latestFeedRound(feed: `0x${string}`): Promise<FeedRound> {
    const [, answer, startedAt, updatedAt] = await this.safely('eth_call', () => this.client.readContract({ address: feed, abi: aggregatorV3Abi, functionName: 'latestRoundData' }));
    return { answer, startedAt, updatedAt };
  }

  /**
   * A Chainlink price feed's latest round with its `decimals()` and the bounds of the aggregator behind
   * the proxy (`aggregator()`, then its `minAnswer()` and `maxAnswer()`), all eth_call at the tip. A feed
   * without them (not a Chainlink proxy) cannot be read.
   */
  async latestPriceRound(feed: `0x${string}`): Promise<PriceRound> {
    const [decimals, round, aggregator] = await Promise.all([
      this.safely('eth_call', () => this.client.readContract({ address: feed, abi: aggregatorV3Abi, functionName: 'decimals' })),
      this.latestFeedRound(feed),
      this.safely('eth_call', () => this.client.readContract({ address: feed, abi: aggregatorV3Abi, functionName: 'aggregator' })),
    ]);
    const [minAnswer, maxAnswer] = await this.safely('eth_call', () =>
      Promise.all([
        this.client.readContract({ address: aggregator, abi: aggregatorV3Abi, functionName: 'minAnswer' }),
        this.client.readContract({ address: aggregator, abi: aggregatorV3Abi, functionName: 'maxAnswer' }),
      ]),
    );
    return { ...round, decimals, minAnswer, maxAnswer };
  }

  async nonces(address: string): Promise<{ confirmed: bigint; pending: bigint }> {
    const owner = getAddress(address);
    const [confirmed, pending] = await Promise.all(
      (['latest', 'pending'] as const).map((blockTag) => this.safely('eth_getTransactionCount', () => this.client.getTransactionCount({ address: owner, blockTag }))),
    );
    return { confirmed: BigInt(confirmed!), pending: BigInt(pending!) };
  }

  /**
   * eth_estimateGas at the tip. The node's JSON-RPC error (a revert, too little balance) is its verdict on
   * the call: TransactionRejectedError with the node's own message; anything else is the node unavailable.
   */
  async estimateGas(call: GasEstimateCall): Promise<bigint> {
    const request = { account: getAddress(call.from), to: getAddress(call.to), value: call.value, data: call.data, prepare: false } as const;
    try {
      return await this.client.estimateGas(request);
    } catch (error) {
      // viem's errors name the URL; RpcRequestError's `details` is the node's message alone. An error answered
      // with a non-2xx HTTP status (a rate limit, a gateway's) is about the node, not the call.
      const refusal = error instanceof BaseError ? error.walk((cause) => cause instanceof RpcRequestError) : null;
      if (refusal instanceof RpcRequestError && refusal.status === undefined) {
        throw new TransactionRejectedError(evmRefusalReason(refusal.details), `The node refused to estimate the call: ${refusal.details}`);
      }
      throw new NodeUnavailableError('The node did not answer eth_estimateGas.');
    }
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

  relay(calls: RelayedCall[]): Promise<RelayedAnswer[]> {
    return relayJsonRpc2(this.url, calls, this.limits);
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

/** The middle value (the lower of the two middles for an even count); 0 when there is none. */
function median(values: bigint[]): bigint {
  if (values.length === 0) return 0n;
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}
