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
