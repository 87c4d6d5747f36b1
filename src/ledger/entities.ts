import { BigIntType, Check, Entity, Enum, Index, ManyToOne, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../shared/environments';
import { prefixedId } from '../shared/ids';

/**
 * One account of the double-entry ledger: what one holder has of one asset in one state, or one of
 * the organization's counterparties (the outside world, network fees, the card issuer...). Its
 * balance is the sum of its lines; holders' accounts are also kept as projections (the balance rows
 * the services read under a row lock), which the invariant check compares with the sums. Accounts
 * are never deleted (a trigger refuses it), and nothing cascades into them.
 */
@Entity({ tableName: 'ledger_accounts' })
@Index({ properties: ['organizationId', 'environment', 'type'] })
@Index({ properties: ['holderId'] })
export class LedgerAccount {
  /** Deterministic, so a posting names its accounts without reading them first: see src/ledger/accounts.ts. */
  @PrimaryKey({ type: 'text' })
  key!: string;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  /** A plain id, not a foreign key: the ledger outlives what it describes and sits below every domain. */
  @Property({ type: 'text' })
  organizationId!: string;

  /** A custody asset id (`ETH`, `USDC-ETH`...) or a company-balance currency (`usd`, `sat`...). */
  @Property({ type: 'text' })
  asset!: string;

  @Property({ type: 'text' })
  type!: string;

  /** The custody address or wallet whose balance this is; null for the organization's own and its counterparties. */
  @Property({ type: 'text', nullable: true })
  holderId?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

/**
 * One balanced movement: lines that sum to zero per asset, written once (the unique key makes a
 * retried step post nothing) and never changed (triggers refuse UPDATE and DELETE; a deferred
 * constraint trigger refuses a transaction that commits an unbalanced posting).
 */
@Entity({ tableName: 'ledger_postings' })
@Index({ properties: ['organizationId', 'environment', 'createdAt'] })
// What waits in suspense is listed from its entries: few beside the whole ledger.
@Index({ name: 'ledger_postings_suspense_entered_idx', expression: `create index "ledger_postings_suspense_entered_idx" on "ledger_postings" ("created_at") where kind = 'suspense_entered'` })
@Index({ properties: ['referenceType', 'referenceId'] })
export class LedgerPosting {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('lpst');

  /** What makes the movement happen once, e.g. `custody/<wallet>/<asset>/send_debit/transaction/<id>`. */
  @Property({ type: 'text' })
  @Unique()
  key!: string;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  organizationId!: string;

  /** What moved: `deposit_confirmed`, `send_debit`, `reserve`, `capture`... */
  @Property({ type: 'text' })
  kind!: string;

  @Property({ type: 'text' })
  referenceType!: string;

  @Property({ type: 'text' })
  referenceId!: string;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

/** One side of a posting: a signed amount in the account's asset's base units (never zero). */
@Entity({ tableName: 'ledger_lines' })
@Index({ properties: ['posting'] })
@Index({ properties: ['account'] })
@Check({ name: 'ledger_lines_amount_check', expression: 'amount <> 0' })
export class LedgerLine {
  @PrimaryKey({ type: new BigIntType('bigint'), autoincrement: true })
  id!: bigint;

  @ManyToOne(() => LedgerPosting, { deleteRule: 'restrict' })
  posting!: LedgerPosting;

  @ManyToOne(() => LedgerAccount, { deleteRule: 'restrict' })
  account!: LedgerAccount;

  /** numeric(78,0): any uint256, signed; read and written as decimal strings. */
  @Property({ type: 'decimal', columnType: 'numeric(78,0)' })
  amount!: string;
}

/** The last run of the ledger's invariant check, read by /metrics at each scrape. */
@Entity({ tableName: 'ledger_invariant_checks' })
export class LedgerInvariantCheck {
  /** One row: `latest`. */
  @PrimaryKey({ type: 'text' })
  id: string = 'latest';

  @Property({ type: 'timestamptz' })
  checkedAt!: Date;

  /** How many invariants were found broken (0: the ledger is whole). */
  @Property({ type: 'integer' })
  violations!: number;

  @Property({ type: 'integer' })
  durationMs!: number;
}
