import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/lean';
import type { Environment } from '../api-keys/entities';
import { companyAccount, counterpartyAccount, type Counterparty } from '../ledger/accounts';
import { projectionBreaks, type LedgerBreak, type ProjectionCheck, type ProjectionRow } from '../ledger/invariants';
import { post, posted, type PostingLine } from '../ledger/postings';
import { DomainError } from '../shared/errors';
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
  /**
   * The other side's lines in the same posting, when the money moves to or from another holder of the
   * organization (a card's accounts, a fee) rather than wholly through the rail: the rail's line takes
   * what they leave, and is left out when that is nothing.
   */
  against?: PostingLine[];
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

/** What a company balance moves against, by what moved it: the rail the money came from or went to. */
const COUNTERPARTY_OF: Record<string, Counterparty> = {
  card_transaction: 'card_issuer',
  card_termination: 'card_issuer',
  lightning_payment: 'lightning_network',
  lightning_invoice: 'lightning_network',
  payout_trip_excess: 'payout_desk',
  payout_trip_failed: 'payout_desk',
  payout_trip_underpaid: 'payout_desk',
  payout_late_deposit: 'payout_desk',
  sandbox_credit: 'sandbox_faucet',
};

/**
 * Moves a company balance, exactly once per (reference, kind), inside the caller's transaction:
 * the balance row is locked (`for update`) so concurrent movements serialize, and a movement that
 * would take `available` or `reserved` below zero is refused with 400 insufficient_funds. The
 * movement is a balanced ledger posting (the balance's states against `against`, if given, and the
 * rail it moved through);
 * the row, its projection, moves only when the posting is new. Returns whether this call applied it
 * (false: it had been applied before) and the new balance.
 */
export async function applyBalanceEntry(em: EntityManager, movement: BalanceMovement): Promise<{ applied: boolean; balance: BalanceSnapshot }> {
  if (movement.amount <= 0n) throw new Error(`balance movements are positive, got ${movement.amount}`);
  if (!em.getTransactionContext()) throw new Error('applyBalanceEntry must run inside a transaction');
  const counterparty = COUNTERPARTY_OF[movement.reference.type];
  if (!counterparty) throw new Error(`no ledger counterparty for company balance movements of ${movement.reference.type}`);
  const keys = [movement.organizationId, movement.environment, movement.currency];
  const [availableDelta, reservedDelta] = EFFECTS[movement.kind](movement.amount);
  const key = `company/${movement.organizationId}/${movement.environment}/${movement.currency}/${movement.kind}/${movement.reference.type}/${movement.reference.id}`;
  // The row exists after a balance's first movement: it is created (once, whoever races) only when the lock finds none.
  const lock = () => sql<{ available: string; reserved: string }>(em, 'select available, reserved from company_balances where organization_id = $1 and environment = $2 and currency = $3 for update', keys);
  let [row] = await lock();
  if (!row) {
    await sql(
      em,
      `insert into company_balances (id, organization_id, environment, currency, available, reserved, updated_at)
       values ($1, $2, $3, $4, 0, 0, now()) on conflict (organization_id, environment, currency) do nothing`,
      [new CompanyBalance().id, ...keys],
    );
    [row] = await lock();
  }
  const current = { currency: movement.currency, available: BigInt(row!.available), reserved: BigInt(row!.reserved) };
  const next = { currency: movement.currency, available: current.available + availableDelta, reserved: current.reserved + reservedDelta };
  if (next.available < 0n || next.reserved < 0n) {
    // Refused, unless this movement was already applied (a retry): then it is a no-op, as below.
    if (await posted(em, key)) return { applied: false, balance: current };
    if (next.available < 0n) throw insufficientFunds(movement.currency, movement.amount, current.available);
    throw new Error(`cannot ${movement.kind} ${movement.amount}: only ${current.reserved} reserved`);
  }
  const scope = { organizationId: movement.organizationId, environment: movement.environment };
  const against = movement.against ?? [];
  const otherSide = against.reduce((total, line) => total + line.amount, 0n);
  const applied = await post(em, {
    ...scope,
    key,
    kind: movement.kind,
    reference: movement.reference,
    lines: [
      { account: companyAccount(scope, movement.currency, 'available'), amount: availableDelta },
      { account: companyAccount(scope, movement.currency, 'reserved'), amount: reservedDelta },
      ...against,
      { account: counterpartyAccount(scope, counterparty, movement.currency), amount: -(availableDelta + reservedDelta + otherSide) },
    ],
  });
  if (!applied) return { applied: false, balance: current };
  await sql(
    em,
    'update company_balances set available = available + $4::numeric, reserved = reserved + $5::numeric, updated_at = now() where organization_id = $1 and environment = $2 and currency = $3',
    [...keys, availableDelta.toString(), reservedDelta.toString()],
  );
  return { applied: true, balance: next };
}

/**
 * Company balances as projections of the ledger: each row's `available` and `reserved` equal the
 * sums of its two accounts' lines (a row with no lines, or lines with no row, differs too).
 */
export const companyBalanceProjection: ProjectionCheck = {
  name: 'company_balances',
  async breaks(em: EntityManager, organizationId: string | null): Promise<LedgerBreak[]> {
    const rows = await sql<ProjectionRow>(
      em,
      `with sums as (
         select a.organization_id, a.environment, a.asset,
                coalesce(sum(l.amount) filter (where a.type = 'company_available'), 0) as available,
                coalesce(sum(l.amount) filter (where a.type = 'company_reserved'), 0) as reserved
           from ledger_accounts a join ledger_lines l on l.account_key = a.key
          where a.type in ('company_available', 'company_reserved') and ($1::text is null or a.organization_id = $1)
          group by a.organization_id, a.environment, a.asset
       ), balance_rows as (
         select organization_id::text as organization_id, environment, currency::text as asset, available, reserved from company_balances where $1::text is null or organization_id = $1::text::uuid
       )
       select 'company_balances:' || coalesce(r.organization_id, s.organization_id) || ':' || coalesce(r.environment, s.environment) || ':' || coalesce(r.asset, s.asset) as subject,
              coalesce(r.organization_id, s.organization_id) as organization_id, coalesce(r.environment, s.environment) as environment, coalesce(r.asset, s.asset) as asset,
              jsonb_build_object('available', s.available::text, 'reserved', s.reserved::text) as ledger,
              jsonb_build_object('available', r.available::text, 'reserved', r.reserved::text) as projection
         from balance_rows r full join sums s on s.organization_id = r.organization_id and s.environment = r.environment and s.asset = r.asset`,
      [organizationId],
    );
    // A row a refused first movement created holds zeros and has no lines: it matches.
    return projectionBreaks(rows);
  },
};

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
