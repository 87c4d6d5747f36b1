import { Entity, Enum, ManyToOne, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import { Organization } from '../organizations/entities';
import { prefixedId } from '../shared/ids';

/**
 * `usd` in cents (funds cards, receives withdrawals and terminations); `sat` for Lightning and BTC
 * payout credits; `usdt` and `usdc` in micro-units (6 decimals on every chain) for stablecoin payout
 * credits (an overpayment's excess, a failed or late payout's funds).
 */
export const BALANCE_CURRENCIES = ['usd', 'sat', 'usdt', 'usdc'] as const;
export type BalanceCurrency = (typeof BALANCE_CURRENCIES)[number];

export const BALANCE_ENTRY_KINDS = ['credit', 'debit', 'reserve', 'release', 'capture'] as const;
export type BalanceEntryKind = (typeof BALANCE_ENTRY_KINDS)[number];

/**
 * One organization's balance in one currency and one environment (sandbox money never funds a live
 * card); moved only by `applyBalanceEntry` under a row lock.
 */
@Entity({ tableName: 'company_balances' })
@Unique({ properties: ['organization', 'environment', 'currency'] })
export class CompanyBalance {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('bal');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Enum({ items: () => BALANCE_CURRENCIES, nativeEnumName: 'balance_currency' })
  currency!: BalanceCurrency;

  /** Spendable, in the currency's smallest unit. numeric(38,0) read as a string: exact beyond 2^53. */
  @Property({ type: 'decimal', precision: 38, scale: 0, default: 0 })
  available: string = '0';

  /** Held for money in flight (a Lightning payment's amount plus its fee cap, say). */
  @Property({ type: 'decimal', precision: 38, scale: 0, default: 0 })
  reserved: string = '0';

  @Property({ type: 'timestamptz' })
  updatedAt: Date = new Date();
}
