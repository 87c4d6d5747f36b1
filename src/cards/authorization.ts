import type { EntityManager } from '@mikro-orm/postgresql';
import { emit } from '../events/service';
import { errors } from '../shared/errors';
import { CardTransaction, type Card } from './entities';
import { presentTransaction } from './presenters';
import { cardDestinations, findCard, type CardTenant } from './service';
import { exceededSpendLimit } from './spend-limits';

/**
 * A merchant authorization (sandbox helper, sandbox keys only, so it only ever finds sandbox
 * cards: a live card is 404 to it like any other): under the card lock, approved only when the card is
 * active and not being terminated, its spendable balance covers it and no limit window would be
 * exceeded; recorded either way as a purchase.
 */
export async function authorizePurchase(
  em: EntityManager,
  tenant: CardTenant,
  cardId: string,
  request: { amount: number; merchantName: string | null; at: Date },
): Promise<{ transaction: CardTransaction; declineReason: string | null }> {
  if (tenant.environment !== 'sandbox') throw errors.notFound('card', cardId, 'cardId');
  const card = await findCard(em, tenant, cardId, true);
  const organizationId = tenant.organizationId;
  const amount = BigInt(request.amount);
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
    merchantName: request.merchantName,
    failureReason: declineReason,
    createdAt: request.at,
  });
  await em.flush();
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
