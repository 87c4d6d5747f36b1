import { Entity, Enum, Index, ManyToOne, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import type { AddressFormat, Curve } from '../keys/derivation';
import { Organization } from '../organizations/entities';
import { uuid } from '../shared/ids';

export const WALLET_TYPES = ['hot', 'cold', 'operational'] as const;
export type WalletType = (typeof WALLET_TYPES)[number];

export const HASH_FUNCTIONS = ['no_op', 'sha256', 'keccak256', 'not_applicable', 'eip712', 'psbt'] as const;
export type HashFunction = (typeof HASH_FUNCTIONS)[number];

export type Metadata = Record<string, string | number | boolean | null>;

/**
 * Vaults and everything in them belong to one environment, like Stripe's test and live modes:
 * a sandbox key never sees, or signs with, a live wallet.
 */
@Entity({ tableName: 'vaults' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
export class Vault {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text', nullable: true })
  customerRefId?: string | null;

  @Property({ type: 'json' })
  metadata: Metadata = {};

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/** The next BIP-44 account per organization and chain, shared by both environments so no two wallets share keys. */
@Entity({ tableName: 'custody_account_counters' })
export class AccountCounter {
  @ManyToOne(() => Organization, { primary: true, deleteRule: 'cascade' })
  organization!: Organization;

  @PrimaryKey({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'integer' })
  nextAccount!: number;
}

@Entity({ tableName: 'wallets' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Unique({ properties: ['organization', 'chain', 'accountIndex'] })
export class Wallet {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @ManyToOne(() => Vault, { deleteRule: 'cascade' })
  vault!: Vault;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  @Enum({ items: () => WALLET_TYPES, nativeEnumName: 'wallet_type' })
  walletType!: WalletType;

  @Property({ type: 'text', nullable: true })
  customerRefId?: string | null;

  @Property({ type: 'json' })
  metadata: Metadata = {};

  /** BIP-44 account of this wallet's keys. */
  @Property({ type: 'integer' })
  accountIndex!: number;

  /**
   * BIP-44 coin type of this wallet's keys, fixed at creation (keys/derivation.ts coinTypeFor): 1 for
   * sandbox wallets, the chain's own for live ones. Sandbox Ethereum, Tron and Solana wallets made
   * before that rule keep their chain's, so their addresses never change.
   */
  @Property({ type: 'integer' })
  coinType!: number;

  /** Index the next address takes; moved only by an atomic UPDATE ... RETURNING. */
  @Property({ type: 'integer', default: 0 })
  nextAddressIndex: number = 0;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

@Entity({ tableName: 'addresses' })
@Index({ properties: ['wallet', 'createdAt', 'id'] })
@Unique({ properties: ['wallet', 'addressIndex'] })
@Unique({ properties: ['chain', 'network', 'address'] })
export class Address {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  @Property({ type: 'text' })
  address!: string;

  @Property({ type: 'text' })
  format!: AddressFormat;

  @Property({ type: 'integer' })
  addressIndex!: number;

  @Property({ type: 'text' })
  derivationPath!: string;

  @Property({ type: 'boolean', default: false })
  isPrimary: boolean = false;

  @Property({ type: 'text', default: '' })
  label: string = '';

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

/**
 * The balances ledger: one row per wallet and asset, integers in base units. Rows appear with the
 * first movement; later issues change them only inside transactions holding the row lock.
 */
@Entity({ tableName: 'wallet_balances' })
export class WalletBalance {
  [OptionalProps]?: 'pending';

  @ManyToOne(() => Wallet, { primary: true, deleteRule: 'cascade' })
  wallet!: Wallet;

  @PrimaryKey({ type: 'text' })
  assetId!: string;

  /** numeric(78,0) holds any uint256; read and written as decimal strings, never as JS numbers. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)', default: 0 })
  balance: string = '0';

  @Property({ type: 'decimal', columnType: 'numeric(78,0)', default: 0 })
  locked: string = '0';

  /** Incoming transfers seen but not yet at the chain's confirmation count: not part of `balance`. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)', default: 0 })
  pending: string = '0';

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/**
 * One custody address's ledger on an account-based chain, per asset: what the wallet row holds,
 * split by the address that holds it on chain (a send can only spend what its sending address
 * holds). Moved only by the journal (`postCustodyEntry`), with its wallet row.
 */
@Entity({ tableName: 'address_balances' })
export class AddressBalance {
  [OptionalProps]?: 'pending';

  @ManyToOne(() => Address, { primary: true, deleteRule: 'cascade' })
  address!: Address;

  @PrimaryKey({ type: 'text' })
  assetId!: string;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  @Property({ type: 'decimal', columnType: 'numeric(78,0)', default: 0 })
  balance: string = '0';

  @Property({ type: 'decimal', columnType: 'numeric(78,0)', default: 0 })
  locked: string = '0';

  @Property({ type: 'decimal', columnType: 'numeric(78,0)', default: 0 })
  pending: string = '0';

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

/** One row per signature made: who signed what with which key, never the key or the payload itself. */
@Entity({ tableName: 'signing_activities' })
@Index({ properties: ['organization', 'createdAt', 'id'] })
export class SigningActivity {
  /** The signature's activity_id. */
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @ManyToOne(() => Wallet, { deleteRule: 'cascade' })
  wallet!: Wallet;

  @ManyToOne(() => Address, { deleteRule: 'cascade' })
  address!: Address;

  /** The API key that asked for the signature. */
  @Property({ type: 'text' })
  apiKeyId!: string;

  /** The organization seed that signed, and where in its tree. */
  @Property({ type: 'text' })
  seedId!: string;

  @Property({ type: 'text' })
  derivationPath!: string;

  @Property({ type: 'text' })
  curve!: Curve;

  @Enum({ items: () => HASH_FUNCTIONS, nativeEnumName: 'hash_function' })
  hashFunction!: HashFunction;

  /** SHA-256 of the decoded payload bytes, hex. */
  @Property({ type: 'text' })
  payloadSha256!: string;

  /** SHA-256 of the bytes actually signed, hex. */
  @Property({ type: 'text' })
  signedPayloadSha256!: string;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}
