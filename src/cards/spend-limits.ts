import type { EntityManager } from '@mikro-orm/postgresql';
import { errors } from '../shared/errors';
import { AmountError, decimalStringToCents } from '../shared/money';
import { Card, CardTransaction, SPEND_LIMIT_WINDOWS, type SpendLimits, type SpendLimitWindow } from './entities';

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
  return card;
}

/** Where each limit window starts for a purchase at `at` (UTC calendar units; weekly rolls over 7 days). */
function windowStart(window: Exclude<SpendLimitWindow, 'transaction'>, at: Date): Date | null {
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
    case 'all_time':
      return null;
  }
}

/** The first limit a purchase of `amount` at `at` would exceed (`spending_limit_<window>`), or null. Counts approved purchases only. */
export async function exceededSpendLimit(em: EntityManager, card: Card, amount: bigint, at: Date): Promise<string | null> {
  const limits = card.spendingLimits;
  if (limits.transaction !== undefined && amount > BigInt(limits.transaction)) return 'spending_limit_transaction';
  for (const window of ['daily', 'weekly', 'monthly', 'yearly', 'all_time'] as const) {
    const limit = limits[window];
    if (limit === undefined) continue;
    const start = windowStart(window, at);
    // The rolling week excludes its start instant; calendar windows include theirs.
    const since = start === null ? {} : { createdAt: window === 'weekly' ? { $gt: start, $lte: at } : { $gte: start, $lte: at } };
    const approved = await em.find(CardTransaction, { card, type: 'purchase', status: 'completed', ...since }, { fields: ['amount'] });
    const spent = approved.reduce((sum, purchase) => sum + BigInt(purchase.amount), 0n);
    if (spent + amount > BigInt(limit)) return `spending_limit_${window}`;
  }
  return null;
}
