import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/lean';
import { emit } from '../events/service';
import { isUuid } from '../shared/ids';
import { issuerAuthorizationReference } from './authorization';
import { Card, CardTransaction, type CardTransactionType } from './entities';
import { recordIssuerSync } from './issuer-sync';
import { cardTransactionReference, postCardMovement } from './ledger';
import { presentTransaction } from './presenters';
import { cardDestinations } from './lookups';
import { lockingOnlyItsRow } from '../db/row-lock';

/**
 * A live card's money after our decision on an authorization, as the issuer moved it. The card is
 * charged, for each authorization, what its transactions' balance moves add up to (the purchase,
 * then reversals and capture adjustments, all referenced under the authorization's reference), and
 * the issuer's later word brings that charge to what the issuer says:
 * - a pending authorization's held amount only ever lowers it (a reversal down to it), so a replayed
 *   or older state moves nothing; a pending state written before our last decision on it (an
 *   incremental authorization approved since) moves nothing either: it does not hold the increase yet;
 * - a reversed or closed authorization with no capture lowers it to zero (also one the issuer itself
 *   declined after we approved it);
 * - a capture sets it: the first capture of an authorization brings the charge to the captured
 *   amount (debiting an over-capture, releasing the rest of an under-capture), any later one
 *   debits in full; once a capture is recorded or listed, the authorization's own states move nothing.
 * Every movement happens under the card's row lock, once per issuer object (the transaction
 * reference is unique per organization and environment).
 */

/** What the issuer says of one of its authorizations after the decision (Stripe's `issuing_authorization.created` / `.updated`). */
export interface IssuerAuthorizationState {
  issuerCardId: string;
  organizationId: string;
  authorizationId: string;
  status: 'pending' | 'closed' | 'reversed';
  /** Cents the issuer still holds for it. */
  heldAmount: bigint;
  /** The issuer lists a capture on it: that capture's own event settles it. */
  captured: boolean;
  /** How many of its requests the issuer had decided when it wrote this state (its request history), when it says. */
  requestsDecided: number | null;
}

/** A capture or refund at the issuer (Stripe's `issuing_transaction.created`), in positive cents. */
export interface IssuerTransaction {
  issuerCardId: string;
  /** The organization the event names, when it carries the card's metadata. */
  organizationId: string | null;
  transactionId: string;
  type: 'capture' | 'refund';
  amount: bigint;
  authorizationId: string | null;
  merchantName: string | null;
}

const captureReference = (authorizationId: string, transactionId: string) => `${issuerAuthorizationReference(authorizationId)}:capture:${transactionId}`;
/**
 * A reversal is named by the held amount it brought the charge down to: each step of a falling hold is its own. The hold
 * only falls between two of our decisions, so after an incremental authorization the steps are named apart from earlier ones.
 */
const reversalReference = (authorizationId: string, heldAmount: bigint, decisions: number) =>
  `${issuerAuthorizationReference(authorizationId)}${decisions > 1 ? `:after_request:${decisions - 1}` : ''}:reversed_to:${heldAmount}`;
const issuerTransactionReference = (transactionId: string) => `issuer_transaction:${transactionId}`;

/** Brings the card's charge for the authorization down to what the issuer still holds or took; never up. */
export async function followIssuerAuthorization(em: EntityManager, state: IssuerAuthorizationState): Promise<void> {
  if (!isUuid(state.organizationId)) return;
  const card = await lockLiveCard(em, state.issuerCardId, state.organizationId);
  if (!card) return;
  const { charged, captured, decisions } = await authorizationCharge(em, card, state.authorizationId);
  // Captured (recorded here, or listed by the issuer and its event on the way): the captures settle it.
  if (captured || state.captured) return;
  if (state.status === 'pending' && state.requestsDecided !== null && state.requestsDecided < decisions) return;
  const owed = state.status === 'pending' ? state.heldAmount : 0n;
  if (owed >= charged) return;
  await recordMovement(em, card, {
    type: 'reversal',
    reference: reversalReference(state.authorizationId, owed, decisions),
    change: charged - owed,
    spent: owed - charged,
    merchantName: null,
  });
}

/** Records a capture or refund of the issuer on the card, once per issuer transaction. */
export async function followIssuerTransaction(em: EntityManager, transaction: IssuerTransaction): Promise<void> {
  if (transaction.organizationId !== null && !isUuid(transaction.organizationId)) return;
  const card = await lockLiveCard(em, transaction.issuerCardId, transaction.organizationId);
  if (!card) return;
  const { authorizationId, transactionId, amount, merchantName } = transaction;
  const reference = transaction.type === 'capture' && authorizationId ? captureReference(authorizationId, transactionId) : issuerTransactionReference(transactionId);
  if (transaction.type === 'refund') {
    await recordMovement(em, card, { type: 'refund', reference, change: amount, spent: 0n, merchantName });
    return;
  }
  // A capture with no authorization of ours (a force capture) or after an earlier capture is charged in full.
  const charge = authorizationId ? await authorizationCharge(em, card, authorizationId) : null;
  const change = charge && !charge.captured ? charge.charged - amount : -amount;
  // Recorded even when it equals the charge: the capture is then known, and the authorization's later states move nothing.
  await recordMovement(em, card, { type: 'capture_adjustment', reference, change, spent: -change, merchantName });
}

/**
 * The live card the issuer names, locked. The organization is the card's issuer metadata when the
 * event carries it; Stripe's transaction events name the card by id only, which is Stripe's own and
 * names one card of this platform.
 */
function lockLiveCard(em: EntityManager, issuerCardId: string, organizationId: string | null): Promise<Card | null> {
  return em.findOne(
    Card,
    { ...(organizationId ? { organization: organizationId } : {}), environment: 'live', issuerCardId },
    { populate: ['customer'], ...lockingOnlyItsRow(em, Card) },
  );
}

/**
 * What the card is charged for the authorization (its transactions' balance moves), whether a capture of it was recorded, and
 * how many of its requests we decided (its purchases, approved or declined: the first and each increment).
 */
async function authorizationCharge(em: EntityManager, card: Card, authorizationId: string): Promise<{ charged: bigint; captured: boolean; decisions: number }> {
  const reference = issuerAuthorizationReference(authorizationId);
  const [row] = await sql<{ charged: string; captured: boolean; decisions: number }>(
    em,
    `select coalesce(sum(balance_before - balance_after), 0)::text as charged, coalesce(bool_or(starts_with(reference, $5)), false) as captured,
            (count(*) filter (where type = 'purchase'))::int as decisions
       from card_transactions
      where organization_id = $1 and environment = $2 and card_id = $3 and type in ('purchase', 'reversal', 'capture_adjustment')
        and (reference = $4 or starts_with(reference, $4 || ':'))`,
    [card.organization.id, card.environment, card.id, reference, `${reference}:capture:`],
  );
  return { charged: BigInt(row!.charged), captured: row!.captured, decisions: row!.decisions };
}

/**
 * Moves the card's balance by `change` (a credit when positive; a debit may take it below zero: the
 * issuer already paid), and what it has spent by `spent`, once per reference; records the movement as a completed card
 * transaction, posts it against `card_issuer` and announces it; the issuer's copy of the card is then synced to its new balance.
 */
async function recordMovement(
  em: EntityManager,
  card: Card,
  movement: { type: CardTransactionType; reference: string; change: bigint; spent: bigint; merchantName: string | null },
): Promise<void> {
  // Taken: this movement was recorded (a replay), or a client's fund or withdraw reference holds the name, which moves nothing of ours.
  if (await em.findOne(CardTransaction, { organization: card.organization, environment: card.environment, reference: movement.reference })) return;
  const before = BigInt(card.balance);
  const after = before + movement.change;
  card.balance = after.toString();
  card.spentAllTime = (BigInt(card.spentAllTime) + movement.spent).toString();
  const transaction = em.create(CardTransaction, {
    organization: card.organization,
    environment: card.environment,
    card,
    type: movement.type,
    status: 'completed',
    amount: (movement.change < 0n ? -movement.change : movement.change).toString(),
    balanceBefore: before.toString(),
    balanceAfter: after.toString(),
    reference: movement.reference,
    merchantName: movement.merchantName,
  });
  recordIssuerSync(em, card);
  await em.flush();
  await postCardMovement(em, card, { kind: movement.type, reference: cardTransactionReference(transaction.id), change: { available: movement.change }, counterparty: 'card_issuer' });
  await emit(em, {
    organizationId: card.organization.id,
    environment: card.environment,
    type: 'card.transaction.completed',
    data: { card_id: card.id, transaction: presentTransaction(transaction, card) },
    destinations: cardDestinations(card),
    dedupeKey: `card.transaction:${transaction.id}`,
  });
}
