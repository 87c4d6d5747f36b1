import { Entity, Enum, Index, ManyToOne, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { AddressBookEntry } from '../address-book/entities';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import { Address, Vault, Wallet } from '../custody/entities';
import { GasStation } from '../gas-stations/entities';
import { Organization } from '../organizations/entities';
import { uuid } from '../shared/ids';
import { OutgoingTransaction } from '../transactions/entities';

export const DESTINATION_TYPES = ['address_book', 'vault'] as const;
export type DestinationType = (typeof DESTINATION_TYPES)[number];
export const TRIGGER_TYPES = ['threshold', 'scheduled', 'manual'] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];
/** Who pays a token sweep's gas: the source address itself, the organization's gas station, or the platform's sponsorship. */
export const GAS_SOURCES = ['hedge_paymaster', 'customer_gas_station', 'wallet'] as const;
export type GasSource = (typeof GAS_SOURCES)[number];
export const THRESHOLD_BASES = ['aggregate', 'per_address'] as const;
export type ThresholdBasis = (typeof THRESHOLD_BASES)[number];
export const THRESHOLD_CURRENCIES = ['usd', 'token'] as const;
export type ThresholdCurrency = (typeof THRESHOLD_CURRENCIES)[number];

/** One asset a rule sweeps; Decimal fields are display decimals as strings. `asset_id` is the catalogue's. */
export interface ConsolidationAsset {
  asset_id: string;
  symbol: string;
  contract_address: string | null;
  is_native: boolean;
  min_amount_to_move: string;
  min_balance_to_leave: string;
}

/**
 * A sweeping rule: move the listed assets from every address of a vault's wallets on one chain to
 * one destination, when triggered (manually, on a schedule, or when a deposit takes a balance over
 * a threshold). Deleting a rule keeps it (deleted_at) so that its runs and sweeps stay readable.
 */
@Entity({ tableName: 'consolidation_rules' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
// Threshold triggers look up the enabled rules of a vault on a chain when a deposit is credited.
@Index({ properties: ['vault', 'chain', 'enabled'] })
export class ConsolidationRule {
  [OptionalProps]?: 'enabled' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => Vault, { deleteRule: 'cascade' })
  vault!: Vault;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  @Property({ type: 'boolean', default: true })
  enabled: boolean = true;

  @Property({ type: 'text' })
  destinationType!: DestinationType;

  @ManyToOne(() => AddressBookEntry, { deleteRule: 'restrict', nullable: true })
  destinationAddressBook?: AddressBookEntry | null;

  @ManyToOne(() => Vault, { deleteRule: 'restrict', nullable: true })
  destinationVault?: Vault | null;

  @Property({ type: 'text' })
  gasSource!: GasSource;

  @ManyToOne(() => GasStation, { deleteRule: 'restrict', nullable: true })
  gasStation?: GasStation | null;

  @Property({ type: 'json' })
  assets!: ConsolidationAsset[];

  @Property({ type: 'text' })
  triggerType!: TriggerType;

  @Property({ type: 'text', nullable: true })
  scheduleCron?: string | null;

  @Property({ type: 'text', nullable: true })
  thresholdBasis?: ThresholdBasis | null;

  @Property({ type: 'text', nullable: true })
  thresholdCurrency?: ThresholdCurrency | null;

  /** Decimal string: USD, or display units of each asset (token currency). */
  @Property({ type: 'text', nullable: true })
  thresholdValue?: string | null;

  /** Decimal string: a sweep worth less in USD is not made. */
  @Property({ type: 'text', nullable: true })
  minConsolidateUsd?: string | null;

  /** The run in progress, if any: one at a time per rule. */
  @Property({ type: 'uuid', nullable: true })
  activeRunId?: string | null;

  /**
   * The key the rule's automation acts for: the key that created it, or the key that took it over
   * (src/automations/ownership.ts). The actor the policies see for its scheduled and threshold
   * sweeps (null: created before this was recorded).
   */
  @Property({ type: 'text', nullable: true })
  createdByKeyId?: string | null;

  /** Set when that key was revoked: the rule starts no run until a key takes it over. */
  @Property({ type: 'timestamptz', nullable: true })
  automationPausedAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  deletedAt?: Date | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/**
 * pending (recorded, its workflow starting) → scanning (reading the vault's addresses) → sweeping
 * (sweeps submitted, waiting for their confirmations) → completed (every sweep confirmed, or
 * nothing to sweep), partially_failed (some sweeps failed, some confirmed), failed (every sweep
 * failed, or the run could not proceed).
 */
export const RUN_STATUSES = ['pending', 'scanning', 'sweeping', 'completed', 'partially_failed', 'failed'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const FINISHED_RUN_STATUSES: readonly RunStatus[] = ['completed', 'partially_failed', 'failed'];
export const TRIGGER_SOURCES = ['manual', 'scheduled', 'threshold'] as const;
export type TriggerSource = (typeof TRIGGER_SOURCES)[number];

/** The last trigger that arrived while the run was going: recorded on it rather than starting a second run. */
export interface RecordedTrigger {
  source: TriggerSource;
  at: string;
  /** Threshold: the deposit that crossed it. Manual: the key or member that asked. */
  detail?: string;
}

export interface AssetTotal {
  asset_id: string;
  asset_address: string | null;
  asset_symbol: string;
  /** Display decimal. */
  amount_swept: string;
  sweep_count: number;
}

export interface RunFees {
  total_usd: string;
  breakdown: { kind: string; currency: string; amount: string; amount_usd: string | null }[];
}

@Entity({ tableName: 'consolidation_runs' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['rule', 'createdAt'] })
@Index({ properties: ['status', 'createdAt'] })
export class ConsolidationRun {
  [OptionalProps]?: 'addressesScanned' | 'transfersCreated' | 'transfersConfirmed' | 'transfersFailed' | 'recordedTriggerCount' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => ConsolidationRule, { deleteRule: 'cascade' })
  rule!: ConsolidationRule;

  @ManyToOne(() => Vault, { deleteRule: 'cascade' })
  vault!: Vault;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  @Property({ type: 'text' })
  status!: RunStatus;

  @Property({ type: 'text' })
  triggerSource!: TriggerSource;

  /** The member (or, for a key without a member, the API key) that triggered a manual run; null for automatic ones. */
  @Property({ type: 'text', nullable: true })
  initiatedByUserId?: string | null;

  /** Manual runs: the key that asked, the actor the policies see for the run's sweeps. */
  @Property({ type: 'text', nullable: true })
  initiatedByKeyId?: string | null;

  @Property({ type: 'integer', default: 0 })
  addressesScanned: number = 0;

  @Property({ type: 'integer', default: 0 })
  transfersCreated: number = 0;

  @Property({ type: 'integer', default: 0 })
  transfersConfirmed: number = 0;

  @Property({ type: 'integer', default: 0 })
  transfersFailed: number = 0;

  /**
   * Triggers that arrived while the run was going, counted rather than listed, with the last of
   * them: each one rewrites a row of fixed size, however many arrive during a run.
   */
  @Property({ type: 'integer', default: 0 })
  recordedTriggerCount: number = 0;

  @Property({ type: 'json', nullable: true })
  lastRecordedTrigger?: RecordedTrigger | null;

  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  @Property({ type: 'timestamptz', nullable: true })
  startedAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  completedAt?: Date | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/** planned (recorded, not yet sent) → submitted (its transaction on its way) → confirmed, or failed with failure_reason. */
export const SWEEP_STATUSES = ['planned', 'submitted', 'confirmed', 'failed'] as const;
export type SweepStatus = (typeof SWEEP_STATUSES)[number];

/** One transfer of a run: one asset from one source address to the destination, through the sending machinery. */
@Entity({ tableName: 'consolidation_sweeps' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['run', 'createdAt', 'id'] })
@Index({ properties: ['rule', 'status'] })
// A resumed or repeated planning step never makes a second sweep of an address's asset in one run.
@Unique({ properties: ['run', 'sourceAddress', 'assetId'] })
export class ConsolidationSweep {
  [OptionalProps]?: 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => ConsolidationRule, { deleteRule: 'cascade' })
  rule!: ConsolidationRule;

  @ManyToOne(() => ConsolidationRun, { deleteRule: 'cascade' })
  run!: ConsolidationRun;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  @ManyToOne(() => Address, { deleteRule: 'cascade' })
  sourceAddress!: Address;

  @Property({ type: 'text' })
  destinationAddress!: string;

  @Property({ type: 'text' })
  assetId!: string;

  /** Base units. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;

  @Property({ type: 'text' })
  gasSource!: GasSource;

  @Property({ type: 'text' })
  status!: SweepStatus;

  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  @ManyToOne(() => OutgoingTransaction, { deleteRule: 'set null', nullable: true })
  transaction?: OutgoingTransaction | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}
