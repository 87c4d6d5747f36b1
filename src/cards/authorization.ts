import type { EntityManager } from '@mikro-orm/postgresql';
import { emit } from '../events/service';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { Card, CardTransaction } from './entities';
import { presentTransaction } from './presenters';
import { cardDestinations, findCard, type CardTenant } from './lookups';
import { cardTransactionReference, postCardMovement } from './ledger';
import { exceededSpendLimit } from './spend-limits';
import { lockingOnlyItsRow } from '../db/row-lock';

/**
 * A merchant authorization (sandbox helper, sandbox keys only, so it only ever finds sandbox
 * cards: a live card is 404 to it like any other), decided and recorded by `decidePurchase`.
 */
export async function authorizePurchase(
  em: EntityManager,
  tenant: CardTenant,
  cardId: string,
  request: { amount: number; merchantName: string | null; at: Date },
): Promise<{ transaction: CardTransaction; declineReason: string | null }> {
  if (tenant.environment !== 'sandbox') throw errors.notFound('card', cardId, 'cardId');
  const card = await findCard(em, tenant, cardId, true);
  return decidePurchase(em, card, { amount: BigInt(request.amount), merchantName: request.merchantName, at: request.at, reference: null });
}

/** The purchase reference of an issuer's authorization: its own namespace, apart from the clients' fund and withdraw references. */
export const issuerAuthorizationReference = (authorizationId: string) => `issuer_authorization:${authorizationId}`;

/**
 * An authorization request from the live issuer (Stripe's `issuing_authorization.request`) for the
 * card it names by its own id, within the organization the card's issuer metadata names: null
 * when no live card matches (nothing recorded). Decided once per authorization: a repeat of the
 * request (Stripe retries) answers the recorded decision and moves nothing again.
 */
export async function authorizeIssuerRequest(
  em: EntityManager,
  request: { issuerCardId: string; organizationId: string; authorizationId: string; amount: bigint; merchantName: string | null; at: Date },
): Promise<{ approved: boolean; declineReason: string | null } | null> {
  if (!isUuid(request.organizationId)) return null;
  const tenant = { organization: request.organizationId, environment: 'live' as const };
  const card = await em.findOne(Card, { ...tenant, issuerCardId: request.issuerCardId }, { populate: ['customer'], ...lockingOnlyItsRow(em, Card) });
  if (!card) return null;
  const reference = issuerAuthorizationReference(request.authorizationId);
  const earlier = await em.findOne(CardTransaction, { ...tenant, reference });
  // A client's fund or withdraw reference may be any text: one that took this reference is no decision of ours.
  if (earlier && (earlier.type !== 'purchase' || earlier.card.id !== card.id)) return { approved: false, declineReason: 'reference_conflict' };
  if (earlier) return { approved: earlier.status === 'completed', declineReason: earlier.failureReason ?? null };
  const { declineReason } = await decidePurchase(em, card, { amount: request.amount, merchantName: request.merchantName, at: request.at, reference });
  return { approved: declineReason === null, declineReason };
}

/**
 * Under the card lock the caller holds: approved only when the card is active and not being
 * terminated, its spendable balance covers it and no limit window would be exceeded; recorded
 * either way as a purchase (an approved one posted from the card to `card_issuer`), and announced
 * (card.authorization).
 */
async function decidePurchase(
  em: EntityManager,
  card: Card,
  request: { amount: bigint; merchantName: string | null; at: Date; reference: string | null },
): Promise<{ transaction: CardTransaction; declineReason: string | null }> {
  const organizationId = card.organization.id;
  const amount = request.amount;
  const before = BigInt(card.balance);
  const declineReason = await declineReasonFor(em, card, amount, request.at);
  const after = declineReason ? before : before - amount;
  card.balance = after.toString();
  if (!declineReason) card.spentAllTime = (BigInt(card.spentAllTime) + amount).toString();
  const transaction = em.create(CardTransaction, {
    organization: card.organization,
    environment: card.environment,
    card,
    type: 'purchase',
    status: declineReason ? 'declined' : 'completed',
    amount: amount.toString(),
    balanceBefore: before.toString(),
    balanceAfter: after.toString(),
    reference: request.reference,
    merchantName: request.merchantName,
    failureReason: declineReason,
    createdAt: request.at,
  });
  await em.flush();
  if (!declineReason) await postCardMovement(em, card, { kind: 'purchase', reference: cardTransactionReference(transaction.id), change: { available: -amount }, counterparty: 'card_issuer' });
  await emit(em, {
    organizationId, environment: card.environment,
    type: 'card.authorization',
    data: { card_id: card.id, approved: declineReason === null, decline_reason: declineReason, transaction: presentTransaction(transaction, card) },
    destinations: cardDestinations(card),
  });
  return { transaction, declineReason };
}

async function declineReasonFor(em: EntityManager, card: Card, amount: bigint, at: Date): Promise<string | null> {
  if (card.status === 'frozen') return 'card_frozen';
  if (card.status !== 'active') return 'card_not_active';
  if (card.terminationRequestedAt) return 'card_terminating';
  if (BigInt(card.balance) - BigInt(card.held) < amount) return 'insufficient_funds';
  return exceededSpendLimit(em, card, amount, at);
}
