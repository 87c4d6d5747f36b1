import { BigIntType, Entity, Enum, Index, ManyToOne, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import type { FeeLevel } from '../chains/provider';
import type { StoredFeeTerms } from '../movements/fee-terms';
import { Address, Wallet } from '../custody/entities';
import { Organization } from '../organizations/entities';
import { uuid } from '../shared/ids';

/**
 * A send's life: `pending` (funds locked, being built and signed), `signed` (the signed bytes and
 * tx_hash stored, about to be broadcast, or broadcast with the outcome not yet known),
 * `broadcast` (a node has it), `confirming` (mined, short of the chain's confirmation count),
 * `confirmed` (settled: amount and fee debited, the lock released), `failed` (provably not in the
 * chain: the lock released, nothing debited).
 */
export const TRANSACTION_STATUSES = ['pending', 'signed', 'broadcast', 'confirming', 'confirmed', 'failed'] as const;
export type TransactionStatus = (typeof TRANSACTION_STATUSES)[number];

/** A coin-control input as the caller named it. */
export interface PinnedInput {
  txid: string;
  vout: number;
}


/** The policy engine's decision when the send was asked for (what happened, for the what-if). */
export interface RecordedDecision {
  result: string;
  policy_id: string | null;
  rule_id: string | null;
  action: string | null;
}

const UNPLACED_SETTLED_INDEX = 'transactions_unplaced_settled_index';

/**
 * An outgoing transaction from a custody wallet. Amounts are base units (numeric(78,0) as decimal
 * strings): `amount` in the asset sent, the fee fields in the chain's native asset. The funds it
 * needs are locked on the wallet's ledger from the moment it is accepted (`locked_amount` of the
 * asset, `locked_fee` of the native asset) until it is settled or released, exactly once.
 */
@Entity({ tableName: 'transactions' })
// Settled sends a reorganisation took off the chain, which every scan pass asks the node about: few, found without reading the settled ones.
@Index({
  name: UNPLACED_SETTLED_INDEX,
  expression: `create index "${UNPLACED_SETTLED_INDEX}" on "transactions" ("chain", "environment") where block_hash is null and (status = 'confirmed' or (status = 'failed' and failure_reason = 'reverted'))`,
})
// Settled sends by the height of their block, which every scan pass compares with the blocks it scanned (unplaceSettledOffChain).
@Index({ name: 'transactions_settled_block_idx', expression: 'create index "transactions_settled_block_idx" on "transactions" ("chain", "environment", "block_height") where block_hash is not null' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['wallet', 'createdAt', 'id'] })
@Index({ properties: ['chain', 'environment', 'txHash'] })
@Index({ properties: ['status', 'createdAt'] })
@Index({ properties: ['fromAddress', 'nonce'] })
export class OutgoingTransaction {
  [OptionalProps]?: 'status' | 'confirmations' | 'gross' | 'note' | 'fillFeeFromUnselected' | 'reorganisations' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  @Property({ type: 'text' })
  assetId!: string;

  /** The signing address on account chains; Bitcoin: the change address. */
  @ManyToOne(() => Address, { deleteRule: 'cascade' })
  fromAddress!: Address;

  /** Canonical form for the chain and environment. */
  @Property({ type: 'text' })
  toAddress!: string;

  /** What the caller asked to send. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;

  /** The fee comes out of `amount` (treat_as_gross_amount). */
  @Property({ type: 'boolean', default: false })
  gross: boolean = false;

  /** What the recipient gets: `amount`, or with gross `amount` less the fee limit. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  recipientAmount!: string;

  /** The fee actually paid; null until the chain says (EVM charges gas used, known once mined). */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  fee?: string | null;

  /** The most the fee can be: what is locked for it (EVM: gas limit x max fee per gas). */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  feeLimit!: string;

  @Property({ type: 'json' })
  feeTerms!: StoredFeeTerms;

  @Enum({ items: () => ['low', 'medium', 'high'], nativeEnumName: 'fee_level' })
  feeLevel!: FeeLevel;

  /** Bitcoin: the caller's fee_rate and max_fee_rate, sat/vB, as given. */
  @Property({ type: 'text', nullable: true })
  feeRate?: string | null;

  @Property({ type: 'text', nullable: true })
  maxFeeRate?: string | null;

  /** Bitcoin coin control: the inputs the caller pinned, and whether others may pay the rest. */
  @Property({ type: 'json', nullable: true })
  pinnedInputs?: PinnedInput[] | null;

  @Property({ type: 'boolean', default: false })
  fillFeeFromUnselected: boolean = false;

  /** Locked on the ledger for this send: of the asset sent, and of the native asset for the fee (one row when they are the same asset). */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  lockedAmount!: string;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  lockedFee!: string;

  /** Set when a gas station pays the fee (`sponsor: true`): the sponsorship whose workflow starts this send once the fuel is confirmed. */
  @Property({ type: 'uuid', nullable: true })
  sponsorshipId?: string | null;

  @Property({ type: 'text', default: '' })
  note: string = '';

  @Enum({ items: () => TRANSACTION_STATUSES, nativeEnumName: 'transaction_status' })
  status: TransactionStatus = 'pending';

  /** Ethereum: the account nonce the send was signed with. */
  @Property({ type: new BigIntType('string'), nullable: true })
  nonce?: string | null;

  /** The signed transaction as broadcast (public once broadcast; kept so a retry sends the very same bytes). */
  @Property({ type: 'text', nullable: true })
  signedTransaction?: string | null;

  /** The send's own (original) candidate: its hash, kept whichever candidate the chain mines. */
  @Property({ type: 'text', nullable: true })
  txHash?: string | null;

  /**
   * The candidate the chain mined (the send's own hash or one of its replacements'), which the send
   * settles on; null while none is. A reorganisation that mines another candidate moves it there.
   */
  @Property({ type: 'text', nullable: true })
  minedTxHash?: string | null;

  @Property({ type: new BigIntType('number'), nullable: true })
  blockHeight?: number | null;

  @Property({ type: 'text', nullable: true })
  blockHash?: string | null;

  @Property({ type: 'integer', default: 0 })
  confirmations: number = 0;

  @Property({ type: 'integer' })
  requiredConfirmations!: number;

  /** USD value of the amount when it was asked for (sandbox price table; null without a price source). */
  @Property({ type: 'text', nullable: true })
  amountUsd?: string | null;

  /** The request the policy engine decided, velocity fields included, as it was then: a what-if replays it. */
  @Property({ type: 'json' })
  policyRequest!: Record<string, string | boolean | number>;

  @Property({ type: 'json' })
  policyDecision!: RecordedDecision;

  /** The API key that asked for the send. */
  @Property({ type: 'text' })
  apiKeyId!: string;

  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  @Property({ type: 'text', nullable: true })
  failureMessage?: string | null;

  /** The times a reorganisation took away the block it was settled in: each re-settlement posts entries of its own. */
  @Property({ type: 'integer', default: 0 })
  reorganisations: number = 0;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  broadcastAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  confirmedAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  failedAt?: Date | null;

  /**
   * A settled send a reorganisation took off the chain: the tip at which its loss was first proven
   * (its nonce consumed, its inputs spent by another transaction); the proof counts once it has held
   * for its confirmation count of blocks. Null while unproven.
   */
  @Property({ type: new BigIntType('number'), nullable: true })
  lossSeenAtHeight?: number | null;

  /** When a block was seen mining this send after it had been failed and its lock released: it was debited then, and an alarm raised. */
  @Property({ type: 'timestamptz', nullable: true })
  minedAfterFailureAt?: Date | null;

  /** The chain height from which an automatic fee bump counts blocks: the tip when its latest candidate was seen waiting or broadcast. */
  @Property({ type: new BigIntType('number'), nullable: true })
  waitingSinceHeight?: number | null;
}

export const REPLACEMENT_KINDS = ['speed_up', 'cancel'] as const;
export type ReplacementKind = (typeof REPLACEMENT_KINDS)[number];
/**
 * `requested`: recorded (its extra fee locked), signed and broadcast by the send's workflow;
 * `broadcast`: a node took it; `mined`: the candidate the chain took, which the send settled on;
 * `refused`: the node would not take it (never in a pool: its extra lock released at once);
 * `superseded`: the send settled on another candidate, or failed.
 */
export const REPLACEMENT_STATUSES = ['requested', 'broadcast', 'mined', 'refused', 'superseded'] as const;
export type ReplacementStatus = (typeof REPLACEMENT_STATUSES)[number];

/**
 * A replacement of a broadcast send (issue 31 part 5): the same nonce at a higher fee, paying the
 * same recipient (`speed_up`) or nothing back to the sending address (`cancel`). Each is a
 * candidate the send's workflow follows beside the original; the send settles on the one mined.
 * `locked_fee` is what it locked beyond the send's earlier locks (native asset, its own journal reference).
 */
@Entity({ tableName: 'transaction_replacements' })
@Index({ properties: ['transaction', 'createdAt'] })
export class TransactionReplacement {
  [OptionalProps]?: 'status' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => OutgoingTransaction, { deleteRule: 'cascade' })
  transaction!: OutgoingTransaction;

  @Enum({ items: () => REPLACEMENT_KINDS, nativeEnumName: 'transaction_replacement_kind' })
  kind!: ReplacementKind;

  /** `api`: asked for with POST speed-up or cancel; `automatic`: the send waited FEE_BUMP_AFTER_BLOCKS unmined. */
  @Enum({ items: () => ['api', 'automatic'], nativeEnumName: 'transaction_replacement_origin' })
  origin!: 'api' | 'automatic';

  @Enum({ items: () => REPLACEMENT_STATUSES, nativeEnumName: 'transaction_replacement_status' })
  status: ReplacementStatus = 'requested';

  /** What the recipient gets if this candidate is mined: the send's amount, or 0 for a cancel. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  recipientAmount!: string;

  @Property({ type: 'json' })
  feeTerms!: StoredFeeTerms;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  feeLimit!: string;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  lockedFee!: string;

  @Property({ type: 'text', nullable: true })
  signedTransaction?: string | null;

  @Property({ type: 'text', nullable: true })
  txHash?: string | null;

  @Property({ type: 'json' })
  policyDecision!: RecordedDecision;

  /** The key that asked for it; for an automatic bump, the key that asked for the send. */
  @Property({ type: 'text' })
  apiKeyId!: string;

  @Property({ type: 'text', nullable: true })
  failureMessage?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  broadcastAt?: Date | null;
}

export const WALLET_OUTPUT_STATUSES = ['unconfirmed', 'available', 'locked', 'spent'] as const;
export type WalletOutputStatus = (typeof WALLET_OUTPUT_STATUSES)[number];

/**
 * A Bitcoin output paid to one of a wallet's addresses: a deposit, or the change of the wallet's
 * own send. Spendable once `available` (the deposit, or the send that made the change, confirmed);
 * `locked` by the send that will spend it from the moment that send is accepted, `spent` when it
 * confirms, `available` again when it provably failed.
 */
@Entity({ tableName: 'wallet_outputs' })
@Unique({ properties: ['environment', 'txid', 'vout'] })
@Index({ properties: ['wallet', 'status'] })
export class WalletOutput {
  [OptionalProps]?: 'status' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  @ManyToOne(() => Address, { deleteRule: 'cascade' })
  address!: Address;

  @Property({ type: 'text' })
  txid!: string;

  @Property({ type: 'integer' })
  vout!: number;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;

  /** `deposit` (seen by scanning) or `change` (made by the wallet's own send, never a deposit). */
  @Enum({ items: () => ['deposit', 'change'], nativeEnumName: 'wallet_output_origin' })
  origin!: 'deposit' | 'change';

  @Enum({ items: () => WALLET_OUTPUT_STATUSES, nativeEnumName: 'wallet_output_status' })
  status: WalletOutputStatus = 'unconfirmed';

  /** The send that locked (then spent) this output. */
  @ManyToOne(() => OutgoingTransaction, { deleteRule: 'set null', nullable: true })
  spentBy?: OutgoingTransaction | null;

  /** The send whose change this is. */
  @ManyToOne(() => OutgoingTransaction, { deleteRule: 'cascade', nullable: true })
  createdBy?: OutgoingTransaction | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}
