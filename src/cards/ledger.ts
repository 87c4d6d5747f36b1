/**
 * A card's money in the double-entry ledger: its `available` and `held` accounts
 * (src/ledger/accounts.ts `cardAccount`), of which the card row's `balance` (available + held) and
 * `held` are projections, written in the same transaction as each posting. Money between the card
 * and the company balance posts through `applyBalanceEntry` with the card's lines as its other side
 * (`cardLines`); what moves the card alone (a hold, a purchase, the issuer's later word) posts here.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/lean';
import { cardAccount, CARD_ASSET, counterpartyAccount, type Counterparty } from '../ledger/accounts';
import { projectionBreaks, type LedgerBreak, type ProjectionCheck, type ProjectionRow } from '../ledger/invariants';
import { post, type PostingLine } from '../ledger/postings';
import type { Card } from './entities';

/** How a movement changes a card's states, in signed cents. */
export interface CardChange {
  available?: bigint;
  held?: bigint;
}

/** The card's lines of a posting (zero lines are left out by `post`). */
export const cardLines = (cardId: string, change: CardChange): PostingLine[] => [
  { account: cardAccount(cardId, 'available'), amount: change.available ?? 0n },
  { account: cardAccount(cardId, 'held'), amount: change.held ?? 0n },
];

/** The platform's fee of a card funding or withdrawal, as a line of its posting. */
export const cardFeeLine = (card: Pick<Card, 'organization' | 'environment'>, fee: bigint): PostingLine => ({
  account: counterpartyAccount({ organizationId: card.organization.id, environment: card.environment }, 'card_fees', CARD_ASSET),
  amount: fee,
});

/** The ledger reference of a card transaction's movements: its id makes each posting once. */
export const cardTransactionReference = (transactionId: string) => ({ type: 'card_transaction', id: transactionId });

/**
 * Posts a movement of the card alone, once per (card, kind, reference), in the caller's transaction:
 * the card's states against `counterparty` (the rest of `change`; none for a move between the card's
 * own states). The caller writes the card row in the same transaction.
 */
export async function postCardMovement(
  em: EntityManager,
  card: Pick<Card, 'id' | 'organization' | 'environment'>,
  movement: { kind: string; reference: { type: string; id: string }; change: CardChange; counterparty?: Counterparty },
): Promise<void> {
  const scope = { organizationId: card.organization.id, environment: card.environment };
  const lines = cardLines(card.id, movement.change);
  const total = lines.reduce((sum, line) => sum + line.amount, 0n);
  // A movement of nothing (a capture equal to what was charged) is recorded by its card transaction alone.
  if (lines.every((line) => line.amount === 0n)) return;
  if (total !== 0n && !movement.counterparty) throw new Error(`card movement ${movement.kind} of ${card.id} needs a counterparty for ${total}`);
  await post(em, {
    ...scope,
    key: `card/${card.id}/${movement.kind}/${movement.reference.type}/${movement.reference.id}`,
    kind: movement.kind,
    reference: movement.reference,
    lines: [...lines, ...(movement.counterparty ? [{ account: counterpartyAccount(scope, movement.counterparty, CARD_ASSET), amount: -total }] : [])],
  });
}

/**
 * Cards as projections of the ledger: each card's `balance` equals the sum of its two accounts'
 * lines and its `held` its held account's (a card with no lines holds zeros). A negative balance is
 * no break: the issuer may capture more than the card held (it already paid, docs/cards.md), and
 * the card transaction announcing it says so; a negative `held` is.
 */
export const cardBalanceProjection: ProjectionCheck = {
  name: 'card_balances',
  async breaks(em: EntityManager, organizationId: string | null): Promise<LedgerBreak[]> {
    const rows = await sql<ProjectionRow>(
      em,
      `with sums as (
         select a.holder_id as card_id, a.organization_id, a.environment,
                coalesce(sum(l.amount), 0) as balance,
                coalesce(sum(l.amount) filter (where a.type = 'card_held'), 0) as held
           from ledger_accounts a join ledger_lines l on l.account_key = a.key
          where a.type in ('card_available', 'card_held') and ($1::text is null or a.organization_id = $1)
          group by a.holder_id, a.organization_id, a.environment
       ), card_rows as (
         select id::text as card_id, organization_id::text as organization_id, environment, balance, held from cards where $1::text is null or organization_id = $1::text::uuid
       )
       select 'cards:' || coalesce(r.card_id, s.card_id) as subject,
              coalesce(r.organization_id, s.organization_id) as organization_id, coalesce(r.environment, s.environment) as environment, '${CARD_ASSET}' as asset,
              jsonb_build_object('balance', s.balance::text, 'held', s.held::text) as ledger,
              jsonb_build_object('balance', r.balance::text, 'held', r.held::text) as projection
         from card_rows r full join sums s on s.card_id = r.card_id
        where coalesce(r.balance, 0) <> coalesce(s.balance, 0) or coalesce(r.held, 0) <> coalesce(s.held, 0) or r.held < 0`,
      [organizationId],
    );
    // Only rows that differ or hold a negative `held` are read: every card matching its sums otherwise is whole.
    return projectionBreaks(rows);
  },
};
