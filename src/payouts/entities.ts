import { Entity, Enum, Index, ManyToOne, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import { Address } from '../custody/entities';
import { Organization } from '../organizations/entities';
import { uuid } from '../shared/ids';
import { OutgoingTransaction } from '../transactions/entities';

export const PAYMENT_METHODS = ['bank', 'mobile_money'] as const;
export type PaymentMethod = (typeof PAYMENT_METHODS)[number];

/** One named fee of a quote, in the source asset's base units. */
export interface QuoteFee {
  type: string;
  amount_raw: string;
}

/** A corridor's limits in the destination currency's minor units. */
export interface QuoteLimits {
  currency: string;
  min_raw: string;
  max_raw: string;
}

/**
 * A priced offer: `fromAmount` of an asset on a chain buys `toAmount` of a fiat currency paid by
 * bank or mobile money in a country, at `rate`, until `expiresAt`. Immutable once issued; a trip
 * is initialized from it (rule 1: not after it expires).
 */
@Entity({ tableName: 'payout_quotes' })
export class PayoutQuote {
  [OptionalProps]?: 'createdAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  /** The catalogue's asset id (`USDT_TRX`); the symbol and chain follow from it. */
  @Property({ type: 'text' })
  assetId!: string;

  @Property({ type: 'text' })
  chain!: ChainId;

  /** ISO 4217. */
  @Property({ type: 'text' })
  toCurrency!: string;

  /** ISO 3166-1 alpha-2. */
  @Property({ type: 'text' })
  country!: string;

  @Enum({ items: () => PAYMENT_METHODS, nativeEnumName: 'payout_payment_method' })
  paymentMethod!: PaymentMethod;

  /** What the request's amount was given in: the asset's symbol or `toCurrency`. */
  @Property({ type: 'text' })
  amountCurrency!: string;

  /** Units of `toCurrency` per one unit of the asset, after the spread; an exact decimal string. */
  @Property({ type: 'text' })
  rate!: string;

  /** What the payer sends, fees included: base units of the asset. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  fromAmount!: string;

  /** What the beneficiary receives: minor units of `toCurrency`. */
  @Property({ type: 'decimal', columnType: 'numeric(38,0)' })
  toAmount!: string;

  @Property({ type: 'jsonb' })
  fees!: QuoteFee[];

  @Property({ type: 'jsonb' })
  limits!: QuoteLimits;

  @Property({ type: 'timestamptz' })
  expiresAt!: Date;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

/**
 * A trip's states. awaiting_deposit: the quote is issued and the deposit address waits; funded: a
 * deposit is seen (it may still await its confirmations); processing: the rail was asked to pay;
 * success and failed are the rail's (or compliance's) answer; expired: nothing arrived before the
 * quote expired; held: underpaid beyond the margin with resolution `hold`, left to an operator.
 */
export const TRIP_STATUSES = ['awaiting_deposit', 'funded', 'processing', 'success', 'failed', 'expired', 'held'] as const;
export type TripStatus = (typeof TRIP_STATUSES)[number];
export const FINAL_TRIP_STATUSES: readonly TripStatus[] = ['success', 'failed', 'expired', 'held'];

/** A bank or mobile-money beneficiary as validated (normalised) at initialization. */
export type Beneficiary =
  | { type: 'bank'; accountNumber: string; bankCode: string; accountName: string }
  | { type: 'mobile_money'; phoneNumber: string; network: string; accountName: string };

/**
 * One payout from a quote: the client sends `amountToSend` of the quote's asset to a fresh deposit
 * address of the payout desk, and `payout-trip-<id>` follows the deposit through its confirmations
 * to the rail's answer. `reference` is the client's idempotency key (one trip per reference).
 */
@Entity({ tableName: 'payout_trips' })
@Unique({ properties: ['organization', 'environment', 'reference'] })
// A quote is spent by one trip.
@Unique({ properties: ['quote'] })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['depositAddress'] })
export class PayoutTrip {
  [OptionalProps]?: 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => PayoutQuote, { deleteRule: 'restrict' })
  quote!: PayoutQuote;

  @Property({ type: 'text' })
  reference!: string;

  /** SHA-256 of the initialize body's canonical JSON: the same reference with another body is 409. */
  @Property({ type: 'text' })
  requestHash!: string;

  /** As validated, its account or phone number masked (maskBeneficiary): what the API and events show. */
  @Property({ type: 'jsonb' })
  beneficiary!: Beneficiary;

  /**
   * The whole beneficiary, sealed (src/payouts/beneficiaries.ts), opened only to instruct the rail.
   * Null on a trip stored before beneficiaries were sealed, until `cli migrate` seals it.
   */
  @Property({ type: 'text', nullable: true, hidden: true })
  beneficiarySealed?: string | null;

  /** Where a refund goes (late payments, underpayments beyond the margin) when refunds are configured. */
  @Property({ type: 'text', nullable: true })
  refundAddress?: string | null;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  assetId!: string;

  /** The payout desk's address that receives this trip's deposit (one trip per address). */
  @ManyToOne(() => Address, { deleteRule: 'restrict' })
  depositAddressRecord!: Address;

  @Property({ type: 'text' })
  depositAddress!: string;

  @Enum({ items: () => TRIP_STATUSES, nativeEnumName: 'payout_trip_status' })
  status: TripStatus = 'awaiting_deposit';

  /** Copied from the quote: the quote's expiry is the trip's deadline for funds. */
  @Property({ type: 'timestamptz' })
  expiresAt!: Date;

  /** Base units received by the deadline (pending ones included until they confirm or drop). */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  amountReceived?: string | null;

  @Property({ type: 'timestamptz', nullable: true })
  assetReceivedAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  assetConfirmedAt?: Date | null;

  /** Minor units of the quote's currency actually sent to the rail (pro rata on underpayment). */
  @Property({ type: 'decimal', columnType: 'numeric(38,0)', nullable: true })
  payoutAmount?: string | null;

  /** Base units credited to the organization's balance (an overpayment's excess, a failed payout's funds). */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  creditedAmount?: string | null;

  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  /** Why a trip is held for manual resolution. */
  @Property({ type: 'text', nullable: true })
  holdReason?: string | null;

  /** The rail that pays this trip and its own id of the instruction (our trip id: the rail's idempotency key). */
  @Property({ type: 'text', nullable: true })
  rail?: string | null;

  @Property({ type: 'timestamptz', nullable: true })
  completedAt?: Date | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/**
 * One entry of a trip's timeline: each status it reached and each thing that happened to its money
 * (an excess credited, a late payment received and resolved), once each (`key` is unique per trip).
 */
@Entity({ tableName: 'payout_trip_transitions' })
@Unique({ properties: ['trip', 'key'] })
@Index({ properties: ['trip', 'occurredAt'] })
export class PayoutTripTransition {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => PayoutTrip, { deleteRule: 'cascade' })
  trip!: PayoutTrip;

  /** A status (`funded`) or an event of the trip's money (`excess_credited`, `late_payment_refunded`). */
  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text' })
  key!: string;

  @Property({ type: 'jsonb' })
  details: Record<string, unknown> = {};

  @Property({ type: 'timestamptz' })
  occurredAt: Date = new Date();
}

/** funding: seen while the trip still took funds; late: seen after it had expired or settled. */
export const DEPOSIT_ROLES = ['funding', 'late'] as const;
export type DepositRole = (typeof DEPOSIT_ROLES)[number];
export const DEPOSIT_RESOLUTIONS = ['refund', 'credit', 'hold'] as const;
export type DepositResolution = (typeof DEPOSIT_RESOLUTIONS)[number];

/**
 * One on-chain transfer to a trip's deposit address, as the chain scanner recorded it (the desk's
 * incoming transfer), with what the trip made of it. A late one is resolved by configuration:
 * refunded to the trip's refund address, credited to the organization's balance, or held.
 */
@Entity({ tableName: 'payout_deposits' })
@Unique({ properties: ['incomingTransferId'] })
@Index({ properties: ['trip'] })
export class PayoutDeposit {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => PayoutTrip, { deleteRule: 'cascade' })
  trip!: PayoutTrip;

  @Property({ type: 'uuid' })
  incomingTransferId!: string;

  @Property({ type: 'text' })
  txid!: string;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;

  @Enum({ items: () => DEPOSIT_ROLES, nativeEnumName: 'payout_deposit_role' })
  role!: DepositRole;

  /** When the scanner first saw it. */
  @Property({ type: 'timestamptz' })
  seenAt!: Date;

  @Property({ type: 'timestamptz', nullable: true })
  confirmedAt?: Date | null;

  /** A reorganisation removed it before it confirmed: it counts for nothing. */
  @Property({ type: 'timestamptz', nullable: true })
  droppedAt?: Date | null;

  /** A late deposit's resolution once decided (after it confirmed). */
  @Enum({ items: () => DEPOSIT_RESOLUTIONS, nativeEnumName: 'payout_deposit_resolution', nullable: true })
  resolution?: DepositResolution | null;

  /** The refund that returns it (resolution `refund`). */
  @ManyToOne(() => PayoutRefund, { deleteRule: 'restrict', nullable: true })
  refund?: PayoutRefund | null;

  @Property({ type: 'timestamptz', nullable: true })
  resolvedAt?: Date | null;
}

/**
 * A refund's states: refund_pending while its send is on its way (a send proven failed is replaced
 * by a new one, PAYOUT_REFUND_ATTEMPTS in all); refunded once a send settled on chain; refund_failed
 * when the last send failed or a new one was refused: its deposits are then held for an operator.
 */
export const REFUND_STATUSES = ['refund_pending', 'refunded', 'refund_failed'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];
/** What a refund returns: an underpayment beyond the margin, or a payment that came late. */
export const REFUND_REASONS = ['underpayment', 'late_payment'] as const;
export type RefundReason = (typeof REFUND_REASONS)[number];

/**
 * Money sent back from the payout desk to a trip's refund address, followed by `payout-refund-<id>`
 * until a send of it settles or the attempts are spent. `transaction` is its current send.
 */
@Entity({ tableName: 'payout_refunds' })
@Index({ properties: ['trip'] })
@Index({ properties: ['status', 'createdAt'] })
export class PayoutRefund {
  [OptionalProps]?: 'status' | 'attempts' | 'createdAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  /** The trip's organization and environment (the desk's send is the service's, the refund the trip's). */
  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => PayoutTrip, { deleteRule: 'cascade' })
  trip!: PayoutTrip;

  @Enum({ items: () => REFUND_REASONS, nativeEnumName: 'payout_refund_reason' })
  reason!: RefundReason;

  /** The catalogue's asset id of what is returned (a late payment may be in another asset than the trip's). */
  @Property({ type: 'text' })
  assetId!: string;

  /** Base units returned; on a native coin the send's fee comes out of it. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;

  @Enum({ items: () => REFUND_STATUSES, nativeEnumName: 'payout_refund_status' })
  status: RefundStatus = 'refund_pending';

  @ManyToOne(() => OutgoingTransaction, { deleteRule: 'restrict' })
  transaction!: OutgoingTransaction;

  /** Sends made for it, the current one included. */
  @Property({ type: 'integer', default: 1 })
  attempts: number = 1;

  /** Why it ended refund_failed: the last send's failure reason, or `refused:<code>` for a new send the desk could not make. */
  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  completedAt?: Date | null;
}

export const RAIL_OUTCOMES = ['success', 'failed', 'blocked', 'unknown'] as const;
export type RailOutcome = (typeof RAIL_OUTCOMES)[number];

/**
 * The sandbox rails' own book (src/payouts/providers/sandbox-rail.ts): the outcome a sandbox key set
 * for a trip, and each instruction the rail received, once per trip however often it is submitted.
 */
@Entity({ tableName: 'sandbox_rail_instructions' })
export class SandboxRailInstruction {
  [OptionalProps]?: 'outcome' | 'submissions' | 'createdAt' | 'updatedAt';

  /** The trip id: the rail's idempotency key. */
  @PrimaryKey({ type: 'uuid' })
  tripId!: string;

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  /** What the rail answers: set by `POST /v1/sandbox/payouts/trips/:tripId/outcome`, success by default. */
  @Enum({ items: () => RAIL_OUTCOMES, nativeEnumName: 'sandbox_rail_outcome', default: 'success' })
  outcome: RailOutcome = 'success';

  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  /** How often an instruction for this trip reached the rail (idempotent: it pays at most once). */
  @Property({ type: 'integer', default: 0 })
  submissions: number = 0;

  /** Minor units and currency of the instruction, once received. */
  @Property({ type: 'decimal', columnType: 'numeric(38,0)', nullable: true })
  amount?: string | null;

  @Property({ type: 'text', nullable: true })
  currency?: string | null;

  /** When the rail paid the beneficiary: set once. */
  @Property({ type: 'timestamptz', nullable: true })
  paidAt?: Date | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}
