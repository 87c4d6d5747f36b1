import { Entity, Enum, Index, ManyToOne, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import type { FeeLevel } from '../chains/provider';
import { Wallet } from '../custody/entities';
import { Organization } from '../organizations/entities';
import { OutgoingTransaction } from '../transactions/entities';
import { uuid } from '../shared/ids';

/** How the station prices the fees it pays: each maps to a fee level of the chain's market. */
export const GAS_STRATEGIES = ['economy', 'standard', 'fast'] as const;
export type GasStrategy = (typeof GAS_STRATEGIES)[number];
/** The fee level each strategy pays at (refills, fuel sends, and sponsored fees the caller does not price). */
export const STRATEGY_FEE_LEVEL: Record<GasStrategy, FeeLevel> = { economy: 'low', standard: 'medium', fast: 'high' };

/** `active` is the only status the specification shows; a station is never deleted in this slice. */
export const GAS_STATION_STATUSES = ['active'] as const;
export type GasStationStatus = (typeof GAS_STATION_STATUSES)[number];

/**
 * An organization's gas station on one chain in one environment: native coin held by a custody
 * wallet of its own (operational, in the organization's "Gas stations" vault), so its address,
 * signing, ledger and sends are custody's. One per chain and environment, as Fireblocks and Circle do.
 */
@Entity({ tableName: 'gas_stations' })
@Unique({ properties: ['organization', 'environment', 'chain'] })
// A settled send looks its wallet's station up.
@Unique({ properties: ['wallet'] })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
export class GasStation {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  /** The custody wallet holding the station's funds; its primary address is the station's address. */
  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  @Property({ type: 'text' })
  address!: string;

  /** Base units of the native coin: below this the station is low. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  threshold!: string;

  /** Base units sent by one refill; null until set (auto-refill needs it). */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  refillAmount?: string | null;

  @ManyToOne(() => Wallet, { deleteRule: 'set null', nullable: true })
  refillFromWallet?: Wallet | null;

  @Property({ type: 'boolean' })
  autoRefillEnabled: boolean = false;

  @Property({ type: 'text' })
  gasStrategy: GasStrategy = 'standard';

  /**
   * The most native coin (base units) the station may spend on sponsorship in one UTC day: the fees it
   * funds plus its own fees for funding them. Null: the deployment's default for the chain, as configured
   * now (src/gas-stations/limits.ts), so stations made before the defaults existed need no migration.
   */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  dailySponsorshipBudget?: string | null;

  /** Ceiling on the fee rate the station pays, in the chain's fee unit (gwei, sat/vB, sun, lamports) as a decimal string; null: the deployment's default. */
  @Property({ type: 'text', nullable: true })
  maxGasPrice?: string | null;

  @Property({ type: 'text' })
  status: GasStationStatus = 'active';

  /** The automatic refill in flight, if any: a second automatic refill is never submitted while it is. */
  @Property({ type: 'uuid', nullable: true })
  refillTransactionId?: string | null;

  /** When the last automatic refill was reported failed (every attempt spent); cleared by a refill or a PATCH. */
  @Property({ type: 'timestamptz', nullable: true })
  refillFailedAt?: Date | null;

  /**
   * The key the station's automation acts for: the key that created it, or the key that took it over
   * (src/automations/ownership.ts). The actor the policies see for its automatic refills and fuel
   * (null: created before this was recorded).
   */
  @Property({ type: 'text', nullable: true })
  createdByKeyId?: string | null;

  /** Set when that key was revoked: no automatic refill until a key takes the station over. */
  @Property({ type: 'timestamptz', nullable: true })
  automationPausedAt?: Date | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/** What a sponsorship pays the fee of: a custody send (`sponsor: true`) or a client-signed transaction (sponsor-broadcast). */
export const SPONSORSHIP_KINDS = ['transaction', 'broadcast'] as const;
export type SponsorshipKind = (typeof SPONSORSHIP_KINDS)[number];

/** Who pays: the platform's sponsorship (`hedge_paymaster`), or the organization's own gas station (the specification's order). */
export const FUNDING_MODELS = ['provider_sponsorship', 'customer_gas_station'] as const;
export type FundingModel = (typeof FUNDING_MODELS)[number];

/**
 * funding: the station's fuel send is on its way to the sender. funded (sends): the fuel confirmed and the
 * sponsored send was started. broadcasting (client-signed): the fuel confirmed and the client's bytes are
 * being broadcast and followed. confirmed (client-signed): mined at the confirmation count. failed: the
 * fuel never reached the chain, or the client's transaction was refused.
 */
export const SPONSORSHIP_STATUSES = ['funding', 'funded', 'broadcasting', 'confirmed', 'failed'] as const;
export type SponsorshipStatus = (typeof SPONSORSHIP_STATUSES)[number];

/**
 * One fee paid by a gas station for someone else: the station sends the sender exactly the fee
 * (`fuel_amount`, as Fireblocks' auto-fuel does) and, once that is confirmed, the sponsored
 * transaction goes out, its fee paid from the fuel. Workflow `sponsorship-<id>` carries it.
 */
@Entity({ tableName: 'sponsorships' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
// The daily budget sums a station's sponsorships of the day.
@Index({ properties: ['station', 'createdAt'] })
@Index({ properties: ['status', 'createdAt'] })
// The same client-signed transaction is sponsored once.
@Unique({ properties: ['environment', 'chain', 'txHash'] })
export class Sponsorship {
  [OptionalProps]?: 'broadcastAccepted' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  /** The organization whose fee is paid (for provider sponsorship, not the station's owner). */
  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  kind!: SponsorshipKind;

  @Property({ type: 'text' })
  fundingModel!: FundingModel;

  /** The station that pays. */
  @ManyToOne(() => GasStation, { deleteRule: 'cascade' })
  station!: GasStation;

  @Property({ type: 'text' })
  chain!: ChainId;

  /** The address the fuel goes to: the sponsored transaction's sender. */
  @Property({ type: 'text' })
  senderAddress!: string;

  /** Native base units sent to the sender: the sponsored transaction's whole fee. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  fuelAmount!: string;

  /** The station's send of the fuel (a transaction of the station's organization). */
  @ManyToOne(() => OutgoingTransaction, { deleteRule: 'cascade' })
  fuelTransaction!: OutgoingTransaction;

  /** Counted against the station's daily budget: the fuel plus the fuel send's own fee (its limit until mined; zero if it never was). */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  budgetCharge!: string;

  /** Provider sponsorship: the USD counted against the organization's daily budget (exact decimal). */
  @Property({ type: 'text', nullable: true })
  budgetChargeUsd?: string | null;

  /** kind transaction: the sponsored send. */
  @ManyToOne(() => OutgoingTransaction, { deleteRule: 'cascade', nullable: true })
  sponsoredTransaction?: OutgoingTransaction | null;

  /** kind broadcast: the client's signed bytes (not a secret: it is what goes on the chain), what they move, and their hash. */
  @Property({ type: 'text', nullable: true })
  signedTransaction?: string | null;

  @Property({ type: 'text', nullable: true })
  txHash?: string | null;

  @Property({ type: 'text', nullable: true })
  toAddress?: string | null;

  @Property({ type: 'text', nullable: true })
  assetId?: string | null;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)', nullable: true })
  amount?: string | null;

  /** A node has accepted the client's transaction (or it is already in the chain). */
  @Property({ type: 'boolean', default: false })
  broadcastAccepted: boolean = false;

  @Property({ type: 'text' })
  status!: SponsorshipStatus;

  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  @Property({ type: 'text', nullable: true })
  failureMessage?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}
