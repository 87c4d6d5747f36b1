import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/lean';
import type { Environment } from '../api-keys/entities';
import { DomainError } from '../shared/errors';
import { prefixedId } from '../shared/ids';
import { iso } from '../shared/time';
import { BALANCE_CURRENCIES, type BalanceCurrency, type BalanceEntryKind, CompanyBalance } from './entities';

export interface BalanceMovement {
  organizationId: string;
  /** The environment of the record that moves the money: sandbox and live balances never mix. */
  environment: Environment;
  currency: BalanceCurrency;
  kind: BalanceEntryKind;
  /** Smallest unit (cents, sats); must be positive. */
  amount: bigint;
  reference: { type: string; id: string };
}

export interface BalanceSnapshot {
  currency: BalanceCurrency;
  available: bigint;
  reserved: bigint;
}

export const insufficientFunds = (currency: BalanceCurrency, needed: bigint, available: bigint) =>
  new DomainError({
    kind: 'invalid',
    code: 'insufficient_funds',
    message: `The ${CURRENCY_PRESENTATION[currency].label} balance is insufficient for this operation.`,
    details: { currency: CURRENCY_PRESENTATION[currency].code, unit: CURRENCY_PRESENTATION[currency].unit, required: needed.toString(), available: available.toString() },
  });

/** How each kind moves (available, reserved). */
const EFFECTS: Record<BalanceEntryKind, (amount: bigint) => [bigint, bigint]> = {
  credit: (amount) => [amount, 0n],
  debit: (amount) => [-amount, 0n],
  reserve: (amount) => [-amount, amount],
  release: (amount) => [amount, -amount],
  capture: (amount) => [0n, -amount],
};

/**
 * Moves a company balance, exactly once per (reference, kind), inside the caller's transaction:
 * the balance row is locked (`for update`) so concurrent movements serialize, and a movement that
 * would take `available` or `reserved` below zero is refused with 400 insufficient_funds.
 * Returns whether this call applied it (false: it had been applied before) and the new balance.
 */
export async function applyBalanceEntry(em: EntityManager, movement: BalanceMovement): Promise<{ applied: boolean; balance: BalanceSnapshot }> {
  if (movement.amount <= 0n) throw new Error(`balance movements are positive, got ${movement.amount}`);
  if (!em.getTransactionContext()) throw new Error('applyBalanceEntry must run inside a transaction');
  const keys = [movement.organizationId, movement.environment, movement.currency];
  const [availableDelta, reservedDelta] = EFFECTS[movement.kind](movement.amount);
  // One round trip: the balance row locked (`for update`), the journal entry inserted when the
  // movement leaves neither side below zero, and the balance moved only with an entry inserted (the
  // journal's unique reference makes a movement applied twice insert nothing). Nothing is returned
  // when the balance has no row yet. Under a concurrent movement the lock waits, then reads the row
  // as that one committed it, and the update moves that same version.
  const move = () =>
    sql<{ available: string; reserved: string; moved: boolean }>(
      em,
      `with balance as (
         select available, reserved from company_balances where organization_id = $1 and environment = $2 and currency = $3 for update
       ), entry as (
         insert into company_balance_entries (id, organization_id, environment, currency, kind, amount, reference_type, reference_id, created_at)
         select $4, $1, $2, $3, $5, $6, $7, $8, now() from balance
          where balance.available + $9::numeric >= 0 and balance.reserved + $10::numeric >= 0
         on conflict (organization_id, environment, currency, reference_type, reference_id, kind) do nothing
         returning 1
       ), moved as (
         update company_balances set available = available + $9::numeric, reserved = reserved + $10::numeric, updated_at = now()
          where organization_id = $1 and environment = $2 and currency = $3 and exists (select 1 from entry)
         returning 1
       )
       select balance.available, balance.reserved, exists (select 1 from moved) as moved from balance`,
      [...keys, prefixedId('bent'), movement.kind, movement.amount.toString(), movement.reference.type, movement.reference.id, availableDelta.toString(), reservedDelta.toString()],
    );
  // The row exists after a balance's first movement: it is created (once, whoever races) only when the lock finds none.
  let [row] = await move();
  if (!row) {
    await sql(
      em,
      `insert into company_balances (id, organization_id, environment, currency, available, reserved, updated_at)
       values ($1, $2, $3, $4, 0, 0, now()) on conflict (organization_id, environment, currency) do nothing`,
      [new CompanyBalance().id, ...keys],
    );
    [row] = await move();
  }
  const current = { currency: movement.currency, available: BigInt(row!.available), reserved: BigInt(row!.reserved) };
  const next = { currency: movement.currency, available: current.available + availableDelta, reserved: current.reserved + reservedDelta };
  if (next.available < 0n || next.reserved < 0n) {
    // Refused, unless this movement was already applied (a retry): then it is a no-op, as below.
    const [existing] = await sql<{ id: string }>(
      em,
      `select id from company_balance_entries
        where organization_id = $1 and environment = $2 and currency = $3 and reference_type = $4 and reference_id = $5 and kind = $6`,
      [...keys, movement.reference.type, movement.reference.id, movement.kind],
    );
    if (existing) return { applied: false, balance: current };
    if (next.available < 0n) throw insufficientFunds(movement.currency, movement.amount, current.available);
    throw new Error(`cannot ${movement.kind} ${movement.amount}: only ${current.reserved} reserved`);
  }
  if (!row!.moved) return { applied: false, balance: current };
  return { applied: true, balance: next };
}

export async function readBalances(em: EntityManager, organizationId: string, environment: Environment): Promise<BalanceSnapshot[]> {
  const rows = await em.find(CompanyBalance, { organization: organizationId, environment });
  return BALANCE_CURRENCIES.map((currency) => {
    const row = rows.find((candidate) => candidate.currency === currency);
    return { currency, available: BigInt(row?.available ?? '0'), reserved: BigInt(row?.reserved ?? '0') };
  });
}

/** How each balance shows: its code (what GET /v1/balances and the sandbox credit take), its unit, and its name in messages. */
export const CURRENCY_PRESENTATION = {
  usd: { code: 'USD', unit: 'cent', label: 'USD company' },
  sat: { code: 'BTC', unit: 'sat', label: 'BTC (Lightning)' },
  usdt: { code: 'USDT', unit: 'micro', label: 'USDT' },
  usdc: { code: 'USDC', unit: 'micro', label: 'USDC' },
} as const satisfies Record<BalanceCurrency, { code: string; unit: string; label: string }>;

export function presentBalance(balance: BalanceSnapshot, updatedAt?: Date) {
  return {
    object: 'company_balance' as const,
    currency: CURRENCY_PRESENTATION[balance.currency].code,
    unit: CURRENCY_PRESENTATION[balance.currency].unit,
    available: balance.available.toString(),
    reserved: balance.reserved.toString(),
    total: (balance.available + balance.reserved).toString(),
    ...(updatedAt ? { updated_at: iso(updatedAt) } : {}),
  };
}
