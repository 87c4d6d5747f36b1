import type { ChainId } from '../catalogue/service';

export type FeeLevel = 'low' | 'medium' | 'high';
export const FEE_LEVELS: readonly FeeLevel[] = ['low', 'medium', 'high'];

/**
 * A chain's fee market as its provider reads it, in the chain's base units, a union by fee model.
 */
export interface Eip1559FeeMarket {
  model: 'eip1559';
  /** The base fee per gas of the next block, in wei (Tron: sun per energy unit). */
  baseFeePerGas: bigint;
  /** The priority fee (tip) per gas each level offers, in wei. */
  priorityFeePerGas: Record<FeeLevel, bigint>;
}
/** Bitcoin: what each level pays per virtual byte, in satoshis. */
export interface PerByteFeeMarket {
  model: 'per_byte';
  satPerVbyte: Record<FeeLevel, bigint>;
}
/**
 * Chains priced per transaction (Solana: lamports per signature plus a priority fee; Tron:
 * bandwidth burnt in sun): the whole fee of a plain native transfer at each level.
 */
export interface FlatFeeMarket {
  model: 'flat';
  /** The fee of one plain native transfer at each level, in the native asset's base units. */
  transferFee: Record<FeeLevel, bigint>;
}
export type FeeMarket = Eip1559FeeMarket | PerByteFeeMarket | FlatFeeMarket;

/**
 * Solana: the compute budget of one transfer as the node prices it: the compute unit limit it is
 * signed with, and at each level the price per unit (micro-lamports) for the accounts it writes.
 */
export interface TransferComputeBudget {
  unitLimit: bigint;
  /** `simulation`: the units the node's simulation used, with a margin; `fixed`: the node could not simulate it, the fixed limit. */
  limitFrom: 'simulation' | 'fixed';
  unitPrice: Record<FeeLevel, bigint>;
}

/** A transfer whose compute budget is asked for: what its transaction will carry. */
export interface BudgetedTransfer {
  from: string;
  to: string;
  assetId: string;
  /** Base units the transfer moves. */
  amount: bigint;
  /** The mint of a token asset. */
  tokenAddress?: string;
}

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
  /** The EVM chain id (eth_chainId); Bitcoin nodes: absent. */
  chainId?: number;
  /** A network name where the chain has no numeric id (Bitcoin: main, test, regtest, simnet; devnet: `devnet`). */
  network?: string;
}

/** The newest block of the node's best chain. */
export interface ChainTip {
  height: number;
  hash: string;
}

/** One transfer a mined transaction made to an address: what block scanning credits. */
export interface ObservedTransfer {
  /** The chain's transaction id (hex for Bitcoin and Ethereum, the signature for Solana). */
  txid: string;
  /**
   * Unique within the transaction: `out:<vout>` (a Bitcoin output), `native` (an account chain's
   * value transfer), `log:<logIndex>` (an ERC-20 / TRC-20 Transfer event), `ix:<n>` (a Solana instruction), `ix:<n>.<k>`
   * (the k-th instruction Solana instruction n invoked by CPI).
   */
  position: string;
  /** The receiving address, in the platform's own form for the environment (scripts are matched, not prefixes). */
  to: string;
  /** The sender when the chain says it cheaply; null for Bitcoin (an input's address needs its previous output). */
  from: string | null;
  /** Catalogue asset id (`ETH`, `USDC_ETH`...). Transfers of assets the catalogue does not know are left out. */
  assetId: string;
  /** Base units. */
  amount: bigint;
}

/**
 * Account chains: one transaction of a block and the account that signed and paid for it, whatever it
 * did (a value transfer, a token call, a reverted call): what an outgoing transfer's fee is read from.
 */
export interface ObservedPayment {
  txid: string;
  /** The paying account, in the platform's own form for the environment. */
  from: string;
  /** Native base units the account paid (EVM: gas used x effective gas price). */
  fee: bigint;
  /** Ethereum: the transaction's nonce; another transaction of the account mined with it proves this one never will be. */
  nonce?: bigint;
  /**
   * Solana: the recent blockhash the transaction names (none for a durable-nonce transaction, whose
   * nonce value never expires); once it is no longer valid at the finalized state, no block can take it.
   */
  recentBlockhash?: string;
}

/** UTXO chains: one output a transaction of the block spends. */
export interface ObservedInput {
  /** The spending transaction. */
  txid: string;
  /** The output spent. */
  spends: { txid: string; vout: number };
}

/** A block as scanning reads it: its place in the chain, the transfers it carries and what it spends. */
export interface ObservedBlock {
  height: number;
  hash: string;
  /** The previous block's hash: a mismatch with the one recorded means a reorganisation. */
  parentHash: string;
  time: Date;
  transfers: ObservedTransfer[];
  /** Account chains: every transaction with its payer and fee; empty on UTXO chains. */
  payments: ObservedPayment[];
  /** UTXO chains: every input of every transaction, the coinbase's excepted; empty on account chains. */
  inputs: ObservedInput[];
}

/**
 * The block a Tron or Solana transaction refers to (Tron: the TAPOS reference block; Solana: the recent
 * blockhash), which also bounds its life: Tron until `time` plus its expiration, Solana for 150 blocks.
 */
export interface RecentBlock {
  height: number;
  hash: string;
  time: Date;
}

/** One balance a reconciliation reads: what `address` holds of `assetId`. */
export interface BalanceRead {
  address: string;
  assetId: string;
}

/** One balance a node read at its newest block, with that block's height (Solana: the context slot). */
export interface BalanceAtHeight {
  balance: bigint;
  height: number;
}

/** A transaction output (UTXO chains): the transaction's id and the output's index in it. */
export interface Outpoint {
  txid: string;
  vout: number;
}

/** Where a broadcast transaction stands on the node's best chain. */
export type TransactionStatus =
  | { state: 'unknown' }
  | { state: 'pending' }
  | {
      state: 'mined';
      blockHeight: number;
      blockHash: string;
      confirmations: number;
      succeeded: boolean;
      /**
       * The native base units the sender paid: EVM gas used x effective gas price (reverted or not),
       * Bitcoin inputs minus outputs, the devnet what its ledger charged. Null where a provider cannot
       * tell (none of ours now; a node without a transaction index would be one).
       */
      fee: bigint | null;
    };

/**
 * A thrown failure to reach the node or to understand its answer (timeout, refused connection,
 * HTTP error, malformed reply). Its message is safe to show: it never holds the node's URL, which
 * may carry a provider's API key.
 */
export class NodeUnavailableError extends Error {
  override name = 'NodeUnavailableError';
}

/**
 * The node (or the devnet) refused a transaction: a bad signature, a spent input, a wrong nonce,
 * too little balance or fee. Nothing was broadcast; `reason` is a short machine code
 * (`invalid_signature`, `double_spend`, `nonce_too_low`, `insufficient_funds`, `fee_too_low`,
 * `dust_output`, `malformed`, `rejected`) and the message is safe to show.
 */
export class TransactionRejectedError extends Error {
  override name = 'TransactionRejectedError';
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The one interface between the platform and a chain, one instance per chain and environment.
 * Implementations: `evm-rpc` (any Ethereum JSON-RPC node), `bitcoin-rpc` (a Bitcoin node's RPC),
 * `solana-rpc` (any Solana JSON-RPC node) and `devnet` (the embedded PostgreSQL chains of the sandbox). The optional methods exist where the
 * chain needs them for sending.
 */
export interface ChainProvider {
  /** `evm-rpc`, `bitcoin-rpc`, `solana-rpc` or `devnet`: shown in logs, never the URL. */
  readonly kind: string;
  readonly chain: ChainId;
  /** Asks the node which network it serves. */
  identifyNetwork(): Promise<NetworkIdentity>;
  feeMarket(): Promise<FeeMarket>;
  /** Relays calls to the node in one round trip (a batch when more than one), answers in order. */
  relay(calls: RelayedCall[]): Promise<RelayedAnswer[]>;
  /** The newest block of the best chain. */
  tip(): Promise<ChainTip>;
  /** The block at `height` on the best chain with the transfers it made, or null above the tip. */
  block(height: number): Promise<ObservedBlock | null>;
  /**
   * How many blocks scanning may read at once ahead of its cursor (still processed one by one, in
   * order); 1 when absent. Solana's slot every 400 ms needs more than one round trip at a time.
   */
  readonly blockReadsInParallel?: number;
  /** What the chain itself says `address` holds of `assetId`, in base units, at the tip. */
  balance(address: string, assetId: string): Promise<bigint>;
  /**
   * Account chains whose node keeps state by block (Ethereum): each read's balance at exactly `block`
   * (its hash pins it, so a reorganised block is never read as its successor), in order, in as few
   * round trips as the node allows. Throws NodeUnavailableError when the node no longer has that
   * block or its state. Providers without it (or balancesAtNewest) are read at the tip (`balance`).
   */
  balancesAt?(reads: BalanceRead[], block: ChainTip): Promise<bigint[]>;
  /**
   * Account chains whose node keeps state only at its newest block, but answers many accounts from one
   * state (Solana: getMultipleAccounts at `confirmed`, the commitment its blocks are scanned at): each
   * read's balance with the height it was read at (reads answered together share it), in order. The
   * reconciliation compares each with the scanner's view at that height, once the scanner is there.
   */
  balancesAtNewest?(reads: BalanceRead[]): Promise<BalanceAtHeight[]>;
  /**
   * UTXO chains: what each outpoint holds while it is unspent on the best chain at exactly `block` (the
   * mempool ignored), null once a block spent it or while no block has mined it; in order, in a few
   * batched round trips, with no address index (Bitcoin: gettxout, which btcd and Bitcoin Core both
   * answer). Null as a whole when the node's best block was not `block` for every answer (a block mined
   * or reorganised while reading): nothing read then says anything about `block`. The reconciliation
   * checks with it every output the platform's UTXO table says is unspent; providers without it (the
   * devnet, whose ledger is read exactly at its tip) are compared by `balance`.
   */
  unspentOutputsAt?(outpoints: Outpoint[], block: ChainTip): Promise<(bigint | null)[] | null>;
  /** Sends a signed transaction (hex; Solana base64); throws TransactionRejectedError when refused. */
  broadcast(rawTransaction: string): Promise<{ txid: string }>;
  transactionStatus(txid: string): Promise<TransactionStatus>;
  /** The contract (Ethereum, Tron) or mint (Solana) of a token asset on this network; undefined when none is configured. */
  tokenAddress(assetId: string): string | undefined;
  /**
   * Ethereum: the account's next nonce at the tip (`confirmed`: its mined transactions) and counting the
   * node's mempool (`pending`). Picks a send's nonce; a lost transaction whose nonce is below `confirmed`
   * can never be mined (another transaction consumed it).
   */
  nonces?(address: string): Promise<{ confirmed: bigint; pending: bigint }>;
  /**
   * Bitcoin: whether the output is spent by a mined transaction (the transaction that made it is mined
   * and the output is gone from the chain's unspent set). An input of a send spent so, while the send
   * itself is unknown to the chain, proves a conflicting spend confirmed: the send can never be mined.
   */
  spentInChain?(outpoint: { txid: string; vout: number }): Promise<boolean>;
  /** Tron and Solana: the block a new transaction refers to (the tip, with its time). */
  recentBlock?(): Promise<RecentBlock>;
  /**
   * Solana: whether the signed transaction's validity window has passed at the node's finalized state
   * (its recent blockhash no longer valid there): no block to come can include it. A send unknown to
   * the chain whose window passed can never be mined.
   */
  validityPassed?(rawTransaction: string): Promise<boolean>;
  /** Solana: the same of a transaction known only by its recent blockhash (ObservedPayment.recentBlockhash). */
  blockhashExpired?(blockhash: string): Promise<boolean>;
  /**
   * Ethereum: the gas `call` uses if sent now (eth_estimateGas), so that a fee can be funded before the
   * transaction is signed. Throws TransactionRejectedError when the node says the call would fail.
   */
  estimateGas?(call: GasEstimateCall): Promise<bigint>;
  /**
   * Solana: the compute budget of `transfer` (simulateTransaction for its limit, getRecentPrioritizationFees
   * over the accounts it writes for its price), so that the fee it is charged is known before it is
   * signed. Throws TransactionRejectedError when the simulation says the transfer itself fails.
   */
  transferComputeBudget?(transfer: BudgetedTransfer): Promise<TransferComputeBudget>;
}

/** A call whose gas is estimated: what its transaction will carry. */
export interface GasEstimateCall {
  from: string;
  to: string;
  /** Wei. */
  value?: bigint;
  data?: `0x${string}`;
}
