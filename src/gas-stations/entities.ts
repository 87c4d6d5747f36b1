import { Entity, Enum, Index, ManyToOne, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import { Wallet } from '../custody/entities';
import { Organization } from '../organizations/entities';
import { uuid } from '../shared/ids';

/** How the station prices the fees it pays: each maps to a fee level of the chain's market. */
export const GAS_STRATEGIES = ['economy', 'standard', 'fast'] as const;
export type GasStrategy = (typeof GAS_STRATEGIES)[number];

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

  /** Ceiling on the fee rate the station pays, in the chain's fee unit (gwei, sat/vB, sun, lamports) as a decimal string. */
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

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}
