import { Check, Entity, Enum, Index, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { CHAIN_IDS, type ChainId } from '../../catalogue/service';

/**
 * The devnet's ledger: one public chain per chain id, shared by every organization's sandbox keys
 * like a public testnet. Amounts are base units in numeric(78,0), read and written as decimal strings.
 */

export const DEVNET_TRANSACTION_STATUSES = ['mempool', 'mined'] as const;
export type DevnetTransactionStatus = (typeof DEVNET_TRANSACTION_STATUSES)[number];

@Entity({ tableName: 'devnet_blocks' })
@Unique({ properties: ['chain', 'hash'] })
export class DevnetBlock {
  @Enum({ items: () => CHAIN_IDS, nativeEnumName: 'devnet_chain', primary: true })
  chain!: ChainId;

  @PrimaryKey({ type: 'integer', autoincrement: false })
  height!: number;

  /** sha256 of the block's contents, in the chain's hash form. */
  @Property({ type: 'text' })
  hash!: string;

  @Property({ type: 'text' })
  parentHash!: string;

  @Property({ type: 'timestamptz' })
  time!: Date;

  /** Ethereum: the EIP-1559 base fee this block charged, wei. */
  @Property({ type: 'decimal', precision: 78, scale: 0, nullable: true })
  baseFeePerGas: string | null = null;

  /** Ethereum: the gas its transactions used (what moves the next base fee). */
  @Property({ type: 'decimal', precision: 78, scale: 0, nullable: true })
  gasUsed: string | null = null;

  /** The mining request that produced it (a workflow step), so that a retried request mines nothing more. */
  @Index()
  @Property({ type: 'text', nullable: true })
  producedBy: string | null = null;
}

/** One value movement of an account-chain transaction, amount as a decimal string. */
export interface StoredTransfer {
  position: string;
  to: string;
  assetId: string;
  amount: string;
}

/** Ethereum's gas terms, and once mined, the gas used and the price paid per gas (decimal strings). */
export interface StoredGas {
  limit: string;
  maxFeePerGas: string;
  maxPriorityFeePerGas: string;
  used: string;
  effectiveGasPrice: string | null;
}

@Entity({ tableName: 'devnet_transactions' })
@Index({ properties: ['chain', 'status'] })
@Index({ properties: ['chain', 'blockHeight'] })
@Index({ properties: ['chain', 'sender', 'status'] })
export class DevnetTransaction {
  [OptionalProps]?: 'transfers' | 'coinbase' | 'status' | 'acceptedAt';

  @Enum({ items: () => CHAIN_IDS, nativeEnumName: 'devnet_chain', primary: true })
  chain!: ChainId;

  @PrimaryKey({ type: 'text' })
  txid!: string;

  /** The signed bytes as broadcast (hex; Solana base64). */
  @Property({ type: 'text' })
  raw!: string;

  /** The account debited (account chains); null on Bitcoin, whose inputs say it. */
  @Property({ type: 'text', nullable: true })
  sender: string | null = null;

  @Property({ type: 'decimal', precision: 78, scale: 0, nullable: true })
  nonce: string | null = null;

  /** What orders the mempool: sat/vB (Bitcoin), priority wei per gas (Ethereum), the fee (Tron, Solana). */
  @Property({ type: 'decimal', precision: 78, scale: 0 })
  feeBid!: string;

  /** The most it may pay in fees, native base units (Bitcoin: its fee). */
  @Property({ type: 'decimal', precision: 78, scale: 0 })
  maxFee!: string;

  /** What it paid, once mined. */
  @Property({ type: 'decimal', precision: 78, scale: 0, nullable: true })
  feePaid: string | null = null;

  /** Account chains: what it moves (log positions renumbered block-wide when mined). */
  @Property({ type: 'json' })
  transfers: StoredTransfer[] = [];

  @Property({ type: 'json', nullable: true })
  gas: StoredGas | null = null;

  /** Bitcoin: virtual size, for the fee rate. */
  @Property({ type: 'integer', nullable: true })
  vsize: number | null = null;

  /** Bitcoin: the block's coinbase, which pays the faucet. */
  @Property({ type: 'boolean', default: false })
  coinbase: boolean = false;

  @Enum({ items: () => DEVNET_TRANSACTION_STATUSES, nativeEnumName: 'devnet_transaction_status' })
  status: DevnetTransactionStatus = 'mempool';

  @Property({ type: 'integer', nullable: true })
  blockHeight: number | null = null;

  @Property({ type: 'integer', nullable: true })
  blockIndex: number | null = null;

  @Property({ type: 'timestamptz' })
  acceptedAt: Date = new Date();
}

/** A Bitcoin output, from the moment its transaction is accepted; `spentBy` is the first accepted spender. */
@Entity({ tableName: 'devnet_outputs' })
@Index({ properties: ['chain', 'address'] })
@Index({ properties: ['chain', 'spentBy'] })
export class DevnetOutput {
  @Enum({ items: () => CHAIN_IDS, nativeEnumName: 'devnet_chain', primary: true })
  chain!: ChainId;

  @PrimaryKey({ type: 'text' })
  txid!: string;

  @PrimaryKey({ type: 'integer', autoincrement: false })
  vout!: number;

  /** scriptPubKey, hex. */
  @Property({ type: 'text' })
  script!: string;

  /** The script's address on the sandbox network; null for scripts without one. */
  @Property({ type: 'text', nullable: true })
  address: string | null = null;

  @Property({ type: 'decimal', precision: 78, scale: 0 })
  amount!: string;

  @Property({ type: 'text', nullable: true })
  spentBy: string | null = null;
}

/** What an address holds of an asset at the tip (mined transactions only). */
@Entity({ tableName: 'devnet_balances' })
@Check({ name: 'devnet_balances_amount_check', expression: 'amount >= 0' })
export class DevnetBalance {
  [OptionalProps]?: 'amount';

  @Enum({ items: () => CHAIN_IDS, nativeEnumName: 'devnet_chain', primary: true })
  chain!: ChainId;

  @PrimaryKey({ type: 'text' })
  address!: string;

  @PrimaryKey({ type: 'text' })
  assetId!: string;

  @Property({ type: 'decimal', precision: 78, scale: 0 })
  amount: string = '0';
}

/** Ethereum: how many transactions of the account are mined, which is its next nonce at the tip. */
@Entity({ tableName: 'devnet_nonces' })
export class DevnetNonce {
  [OptionalProps]?: 'nonce';

  @Enum({ items: () => CHAIN_IDS, nativeEnumName: 'devnet_chain', primary: true })
  chain!: ChainId;

  @PrimaryKey({ type: 'text' })
  address!: string;

  @Property({ type: 'decimal', precision: 78, scale: 0 })
  nonce: string = '0';
}
