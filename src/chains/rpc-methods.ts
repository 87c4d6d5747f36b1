import type { ChainId } from '../catalogue/service';

/**
 * The methods the pass-through relays, per chain: reads and the broadcast of a transaction signed
 * elsewhere. Anything that would use the node's own keys or state (eth_sendTransaction, eth_sign,
 * personal_*), administer or debug it (admin_*, debug_*, anvil_*, hardhat_*, evm_*) or hold a
 * subscription (eth_subscribe, filters) is refused with -32601. A chain without a list relays nothing.
 */
export const RPC_METHOD_ALLOWLIST: Partial<Record<ChainId, ReadonlySet<string>>> = {
  ethereum: new Set([
    'eth_chainId',
    'eth_blockNumber',
    'eth_getBalance',
    'eth_getTransactionCount',
    'eth_getTransactionByHash',
    'eth_getTransactionReceipt',
    'eth_getBlockByNumber',
    'eth_getBlockByHash',
    'eth_getLogs',
    'eth_getCode',
    'eth_getStorageAt',
    'eth_call',
    'eth_estimateGas',
    'eth_gasPrice',
    'eth_maxPriorityFeePerGas',
    'eth_feeHistory',
    'eth_syncing',
    'eth_sendRawTransaction',
    'net_version',
    'web3_clientVersion',
  ]),
  // Also what a real bitcoind is relayed: reads and the broadcast, never its wallet or its control.
  bitcoin: new Set(['getblockcount', 'getbestblockhash', 'getblockhash', 'getblock', 'getrawtransaction', 'sendrawtransaction', 'estimatesmartfee']),
  // java-tron's eth-compatible names, and the broadcast of a signed transaction (docs/devnet.md).
  tron: new Set(['eth_chainId', 'eth_blockNumber', 'eth_getBalance', 'eth_getTransactionByHash', 'eth_getTransactionReceipt', 'broadcasthex']),
  solana: new Set(['getSlot', 'getBlockHeight', 'getBalance', 'getLatestBlockhash', 'sendTransaction', 'getTransaction', 'getSignatureStatuses']),
};

/** Ethereum's, Tron's and Solana's JSON-RPC take positional parameters only: named ones are refused here with -32602 (Bitcoin Core takes both). */
export const POSITIONAL_PARAMS_ONLY: ReadonlySet<ChainId> = new Set(['ethereum', 'tron', 'solana']);

/**
 * Each chain's allowed method that broadcasts a signed transaction: the one call of the pass-through that
 * can move value, refused when it spends from a custody address (src/chains/json-rpc.ts).
 */
export const BROADCAST_METHODS: Partial<Record<ChainId, string>> = {
  ethereum: 'eth_sendRawTransaction',
  bitcoin: 'sendrawtransaction',
  tron: 'broadcasthex',
  solana: 'sendTransaction',
};

/**
 * What a call weighs against a request's budget (RPC_BATCH_MAX_COST): the calls that make a node scan
 * logs, run code or return whole blocks weigh more; every other call weighs 1.
 */
const RPC_METHOD_WEIGHTS: Readonly<Record<string, number>> = {
  eth_getLogs: 10,
  eth_call: 5,
  eth_estimateGas: 5,
  eth_getBlockByNumber: 5,
  eth_getBlockByHash: 5,
  eth_feeHistory: 5,
  getblock: 5,
};

export const methodWeight = (method: string): number => RPC_METHOD_WEIGHTS[method] ?? 1;

/** The bounds the pass-through puts on what one call may ask of a node (src/config.ts). */
export interface HeavyParamLimits {
  logRangeMaxBlocks: number;
}

/**
 * Why a call's params ask a node for too much, or null: an eth_getLogs must name one block (blockHash) or
 * a range of block numbers no wider than the limit, tags such as "latest" or an open end being unbounded;
 * a Bitcoin getblock is relayed at verbosity 0 or 1 only (2 and 3 decode every transaction of the block).
 */
export function heavyParamsRefusal(method: string, params: unknown[] | Record<string, unknown> | undefined, limits: HeavyParamLimits): string | null {
  if (method === 'eth_getLogs') return logRangeRefusal(Array.isArray(params) ? params[0] : undefined, limits.logRangeMaxBlocks);
  if (method === 'getblock') {
    const verbosity = Array.isArray(params) ? params[1] : (params?.verbosity ?? params?.verbose);
    if (verbosity === undefined || verbosity === null || verbosity === 0 || verbosity === 1 || typeof verbosity === 'boolean') return null;
    return 'getblock is relayed at verbosity 0 or 1 only (the block with its transaction ids): ask for each transaction with getrawtransaction';
  }
  return null;
}

function logRangeRefusal(filter: unknown, maxBlocks: number): string | null {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) return 'eth_getLogs takes a filter object';
  const { blockHash, fromBlock, toBlock } = filter as Record<string, unknown>;
  if (blockHash !== undefined) return fromBlock === undefined && toBlock === undefined ? null : 'eth_getLogs takes either blockHash or fromBlock and toBlock, not both';
  const from = blockNumber(fromBlock);
  const to = blockNumber(toBlock);
  if (from === null || to === null) {
    return `eth_getLogs needs fromBlock and toBlock as block numbers (hex quantities, not tags such as "latest"), at most ${maxBlocks} blocks apart, or a blockHash`;
  }
  if (to < from) return 'eth_getLogs toBlock is before fromBlock';
  const blocks = to - from + 1n;
  return blocks > BigInt(maxBlocks) ? `eth_getLogs covers at most ${maxBlocks} blocks; this filter covers ${blocks}` : null;
}

/** A block number as a hex quantity (at most 64 bits), or null for a tag or anything else. */
const blockNumber = (value: unknown): bigint | null => (typeof value === 'string' && /^0x(0|[1-9a-fA-F][0-9a-fA-F]{0,15})$/.test(value) ? BigInt(value) : null);
