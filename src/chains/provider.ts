import type { ChainId } from '../catalogue/service';

export type FeeLevel = 'low' | 'medium' | 'high';
export const FEE_LEVELS: readonly FeeLevel[] = ['low', 'medium', 'high'];

/**
 * A chain's fee market as its provider reads it, in the chain's base units (wei for Ethereum).
 * A union by fee model: Bitcoin's per-byte rates join it with the bitcoin-rpc provider.
 */
export interface Eip1559FeeMarket {
  model: 'eip1559';
  /** The base fee per gas of the next block, in wei. */
  baseFeePerGas: bigint;
  /** The priority fee (tip) per gas each level offers, in wei. */
  priorityFeePerGas: Record<FeeLevel, bigint>;
}
export type FeeMarket = Eip1559FeeMarket;

/** One JSON-RPC call as the pass-through relays it: already validated and allowed. */
export interface RelayedCall {
  method: string;
  params?: unknown[] | Record<string, unknown>;
}

/** The node's answer to one relayed call: its result or its own JSON-RPC error object, verbatim. */
export type RelayedAnswer =
  | { result: unknown }
  | { error: { code: number; message: string; data?: unknown } };

/** What the node said its network is, checked at start against the environment's expectation. */
export interface NetworkIdentity {
  /** The EVM chain id (eth_chainId), as a number. */
  chainId: number;
}

/**
 * A thrown failure to reach the node or to understand its answer (timeout, refused connection,
 * HTTP error, malformed reply). Its message is safe to show: it never holds the node's URL, which
 * may carry a provider's API key.
 */
export class NodeUnavailableError extends Error {
  override name = 'NodeUnavailableError';
}

/**
 * The one interface between the platform and a chain, one instance per chain and environment.
 * Implementations: `evm-rpc` (any Ethereum JSON-RPC node) now; `bitcoin-rpc` and the embedded
 * `devnet` next. It grows with the custody flows, under these names: `getBalance`,
 * `getNonce` / `listUnspent`, `broadcast`, `getTransactionStatus` and `getBlock` (for scanning).
 */
export interface ChainProvider {
  /** `evm-rpc`, later `bitcoin-rpc` and `devnet`: shown in logs, never the URL. */
  readonly kind: string;
  readonly chain: ChainId;
  /** Asks the node which network it serves. */
  identifyNetwork(): Promise<NetworkIdentity>;
  feeMarket(): Promise<FeeMarket>;
  /** Relays calls to the node in one round trip (a batch when more than one), answers in order. */
  relay(calls: RelayedCall[]): Promise<RelayedAnswer[]>;
}
