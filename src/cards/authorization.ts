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
  const amount = BigInt(request.amount);
  return decidePurchase(em, card, { amount, authorizationTotal: amount, merchantName: request.merchantName, at: request.at, reference: null });
}

/** The purchase reference of an issuer's authorization: its own namespace, apart from the clients' fund and withdraw references. */
export const issuerAuthorizationReference = (authorizationId: string) => `issuer_authorization:${authorizationId}`;

/**
 * The purchase reference of the issuer's `index`-th request on one authorization (0: the first; later
 * ones are incremental authorizations), under the authorization's reference so its charge counts them.
 */
export const issuerRequestReference = (authorizationId: string, index: number) =>
  index === 0 ? issuerAuthorizationReference(authorizationId) : `${issuerAuthorizationReference(authorizationId)}:request:${index}`;

/** A request of the live issuer to hold money on one of its authorizations. */
export interface IssuerAuthorizationRequest {
  issuerCardId: string;
  organizationId: string;
  authorizationId: string;
  /** How many requests on this authorization the issuer decided before this one: 0 for a new authorization, more for an increment. */
  requestIndex: number;
  /** Cents the issuer already holds for the authorization (0 for a new one). */
  heldAmount: bigint;
  /** Cents this request would hold on top: the whole purchase, or an increment's increase. */
  amount: bigint;
  merchantName: string | null;
  at: Date;
}

/**
 * An authorization request from the live issuer (Stripe's `issuing_authorization.request`) for the
 * card it names by its own id, within the organization the card's issuer metadata names: null
 * when no live card matches (nothing recorded). Each request is a new hold, decided once: an
 * incremental authorization (a later request on the same authorization) is judged on its increase
 * against the balance and the windows as a purchase of its own, and against the single-transaction
 * limit with what the authorization already holds. A repeat of one request (Stripe retries) answers
 * the recorded decision and moves nothing again.
 */
export async function authorizeIssuerRequest(em: EntityManager, request: IssuerAuthorizationRequest): Promise<{ approved: boolean; declineReason: string | null } | null> {
  if (!isUuid(request.organizationId)) return null;
  const tenant = { organization: request.organizationId, environment: 'live' as const };
  const card = await em.findOne(Card, { ...tenant, issuerCardId: request.issuerCardId }, { populate: ['customer'], ...lockingOnlyItsRow(em, Card) });
  if (!card) return null;
  const reference = issuerRequestReference(request.authorizationId, request.requestIndex);
  const earlier = await em.findOne(CardTransaction, { ...tenant, reference });
  // A client's fund or withdraw reference may be any text: one that took this reference is no decision of ours.
  if (earlier && (earlier.type !== 'purchase' || earlier.card.id !== card.id)) return { approved: false, declineReason: 'reference_conflict' };
  if (earlier) return { approved: earlier.status === 'completed', declineReason: earlier.failureReason ?? null };
  const { declineReason } = await decidePurchase(em, card, {
    amount: request.amount,
    authorizationTotal: request.heldAmount + request.amount,
    merchantName: request.merchantName,
    at: request.at,
    reference,
  });
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
  request: { amount: bigint; authorizationTotal: bigint; merchantName: string | null; at: Date; reference: string | null },
): Promise<{ transaction: CardTransaction; declineReason: string | null }> {
  const organizationId = card.organization.id;
  const amount = request.amount;
  const before = BigInt(card.balance);
  const declineReason = await declineReasonFor(em, card, amount, request.authorizationTotal, request.at);
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

/** `amount` is the new hold; `authorizationTotal` what its authorization holds with it (the single-transaction limit's figure). */
async function declineReasonFor(em: EntityManager, card: Card, amount: bigint, authorizationTotal: bigint, at: Date): Promise<string | null> {
  if (card.status === 'frozen') return 'card_frozen';
  if (card.status !== 'active') return 'card_not_active';
  if (card.terminationRequestedAt) return 'card_terminating';
  if (BigInt(card.balance) - BigInt(card.held) < amount) return 'insufficient_funds';
  return exceededSpendLimit(em, card, { amount, authorizationTotal }, at);
}
