import type { EntityManager } from '@mikro-orm/postgresql';
import { errors } from '../shared/errors';
import { AmountError, decimalStringToCents } from '../shared/money';
import { recordIssuerSync } from './issuer-sync';
import { Card, SPEND_LIMIT_WINDOWS, type SpendLimits, type SpendLimitWindow } from './entities';

/** The create request's `card_limits` names (decimal dollars) for the stored windows (cents). */
const LIMIT_INPUT_NAMES: Record<string, SpendLimitWindow> = {
  single_transaction: 'transaction',
  daily: 'daily',
  weekly: 'weekly',
  monthly: 'monthly',
  yearly: 'yearly',
  all_time: 'all_time',
};

/** The `card_limits` of a create request as stored limits. */
export function limitsFromDecimals(cardLimits: Record<string, string | undefined>): SpendLimits {
  const limits: SpendLimits = {};
  for (const [name, value] of Object.entries(cardLimits)) {
    if (value === undefined) continue;
    let cents: bigint;
    try {
      cents = decimalStringToCents(value);
    } catch (error) {
      if (error instanceof AmountError) throw errors.validation('Card limits are decimal amounts with at most two decimal places', `card_limits.${name}`);
      throw error;
    }
    if (cents <= 0n) throw errors.validation('Card limits must be positive', `card_limits.${name}`);
    limits[LIMIT_INPUT_NAMES[name]!] = cents.toString();
  }
  return limits;
}

/** Replaces the limits of a card the caller has locked (cents per window; null or absent: no limit). */
export async function setSpendLimits(em: EntityManager, card: Card, limits: Partial<Record<SpendLimitWindow, number | null>>): Promise<Card> {
  if (card.status === 'terminated') throw errors.conflict('invalid_state_transition', 'A terminated card cannot be changed.');
  const next: SpendLimits = {};
  for (const window of SPEND_LIMIT_WINDOWS) {
    const value = limits[window];
    if (value !== undefined && value !== null) next[window] = String(value);
  }
  card.spendingLimits = next;
  await em.flush();
  recordIssuerSync(em, card);
  return card;
}

/** The windows summed from the card's purchases, in the order they are checked; all_time is the card's running total. */
const SUMMED_WINDOWS = ['daily', 'weekly', 'monthly', 'yearly'] as const;
type SummedWindow = (typeof SUMMED_WINDOWS)[number];

/** Where each summed window starts for a purchase at `at` (UTC calendar units; weekly rolls over 7 days). */
function windowStart(window: SummedWindow, at: Date): Date {
  const year = at.getUTCFullYear();
  switch (window) {
    case 'daily':
      return new Date(Date.UTC(year, at.getUTCMonth(), at.getUTCDate()));
    case 'weekly':
      return new Date(at.getTime() - 7 * 24 * 60 * 60 * 1000);
    case 'monthly':
      return new Date(Date.UTC(year, at.getUTCMonth(), 1));
    case 'yearly':
      return new Date(Date.UTC(year, 0, 1));
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;
/** The UTC day of an instant, as card_daily_purchases keys it. */
const utcDay = (at: Date) => at.toISOString().slice(0, 10);
/** Midnight (UTC) of an instant's day. */
const midnight = (at: Date) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()));

/**
 * Cents of the card's approved purchases in each given window up to `at`, in one statement whose cost
 * does not grow with the card's history: whole days come from card_daily_purchases (at most 366 rows
 * for the year), and only the edge days are read from card_transactions_completed_purchases_index:
 * `at`'s own day up to `at` (an authorization may be dated in the past, so later purchases of its day
 * must not count), and for the rolling week the rest of its first day after its start. The
 * predicate's literals must stay literals: a bound parameter would not match the partial index.
 */
async function spentInWindows(em: EntityManager, card: Card, windows: SummedWindow[], at: Date): Promise<Map<SummedWindow, bigint>> {
  const today = midnight(at);
  const purchases = (range: string) =>
    `(select coalesce(sum(amount), 0) from card_transactions where card_id = ? and type = 'purchase' and status = 'completed' and ${range})`;
  const days = `(select coalesce(sum(amount), 0) from card_daily_purchases where card_id = ? and day >= ?::date and day < ?::date)`;
  const parts: string[] = [`${purchases('created_at >= ? and created_at <= ?')}::text as "today"`];
  const params: unknown[] = [card.id, today, at];
  for (const window of windows) {
    const start = windowStart(window, at);
    if (start >= today) continue; // within today: the today part is the window
    if (window === 'weekly') {
      // The rolling week excludes its start instant; its first day counts from there, then whole days.
      const firstMidnight = midnight(start);
      const secondMidnight = new Date(firstMidnight.getTime() + DAY_MS);
      parts.push(`(${purchases('created_at > ? and created_at < ?')} + ${days})::text as "${window}"`);
      params.push(card.id, start, secondMidnight, card.id, utcDay(secondMidnight), utcDay(today));
    } else {
      // Calendar windows start at a midnight: their days before today are whole.
      parts.push(`${days}::text as "${window}"`);
      params.push(card.id, utcDay(start), utcDay(today));
    }
  }
  const [row] = await em.execute<Record<string, string>[]>(`select ${parts.join(', ')}`, params);
  const spentToday = BigInt(row!.today!);
  return new Map(windows.map((window) => [window, spentToday + (row![window] === undefined ? 0n : BigInt(row![window]))]));
}

/**
 * The first limit a purchase of `amount` at `at` would exceed (`spending_limit_<window>`), or null. Counts approved purchases
 * only. The single-transaction limit applies to the whole authorization (`authorizationTotal`: an increment with what it adds to).
 */
export async function exceededSpendLimit(em: EntityManager, card: Card, purchase: { amount: bigint; authorizationTotal: bigint }, at: Date): Promise<string | null> {
  const { amount } = purchase;
  const limits = card.spendingLimits;
  if (limits.transaction !== undefined && purchase.authorizationTotal > BigInt(limits.transaction)) return 'spending_limit_transaction';
  const limited = SUMMED_WINDOWS.filter((window) => limits[window] !== undefined);
  const spent = limited.length ? await spentInWindows(em, card, limited, at) : new Map<SummedWindow, bigint>();
  for (const window of limited) {
    if (spent.get(window)! + amount > BigInt(limits[window]!)) return `spending_limit_${window}`;
  }
  // Every approved purchase counts toward all time, whenever it happened.
  if (limits.all_time !== undefined && BigInt(card.spentAllTime) + amount > BigInt(limits.all_time)) return 'spending_limit_all_time';
  return null;
}
