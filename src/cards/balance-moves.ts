/**
 * Fundings and withdrawals of a card: judged by the movement gate, the money set aside and the
 * pending transaction written under the card's lock, then settled once its issuer answered.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { applyBalanceEntry } from '../balances/service';
import type { Config } from '../config';
import { emit } from '../events/service';
import { detachedRow, readOneLocked, sql } from '../db/lean';
import { judgeMovement, USD_CENTS } from '../movements/gate';
import type { Caller } from '../policies/service';
import { DomainError, errors } from '../shared/errors';
import { isUuid, uuid } from '../shared/ids';
import { recordStart } from '../temporal/starter';
import { Card, CardTransaction } from './entities';
import { cardBalanceFlow } from './flows/balance';
import { cardFeeLine, cardLines, cardTransactionReference, postCardMovement } from './ledger';
import { presentTransaction } from './presenters';
import { CARD_SECRETS, cardDestinations, invalidStateTransition, tenantFilter, type CardTenant } from './lookups';

/** The funding fee: `bps` basis points of the amount, rounded down to the cent. */
export const fundingFee = (amount: bigint, bps: number): bigint => (amount * BigInt(bps)) / 10_000n;

const cardInsufficientFunds = (needed: bigint, available: bigint) =>
  new DomainError({
    kind: 'invalid',
    code: 'insufficient_funds',
    message: 'The card balance is insufficient for this withdrawal.',
    details: { currency: 'USD', unit: 'cent', required: needed.toString(), available: available.toString() },
  });

/**
 * The card locked (`for update`) in the caller's transaction, detached (src/db/lean.ts) and without its
 * secrets: for a balance move, which reads the card, writes back what changes by a statement of its own
 * and leaves nothing for the entity manager to track or flush.
 */
async function lockCard(em: EntityManager, tenant: CardTenant, cardId: string): Promise<Card> {
  const card = isUuid(cardId) ? await readOneLocked(em, Card, { id: cardId, ...tenantFilter(tenant) }, CARD_SECRETS) : null;
  if (!card) throw errors.notFound('card', cardId, 'cardId');
  return card;
}

export async function reserveFunding(em: EntityManager, card: Card, transaction: CardTransaction): Promise<void> {
  await applyBalanceEntry(em, {
    organizationId: card.organization.id,
    environment: card.environment,
    currency: 'usd',
    kind: 'reserve',
    amount: BigInt(transaction.amount) + BigInt(transaction.feeAmount),
    reference: cardTransactionReference(transaction.id),
  });
}

const transactionTypeOf = (type: 'fund' | 'withdraw') => (type === 'fund' ? 'funding' : 'withdrawal');

/**
 * The movement gate's decision on a funding (`card_funding`: from the USD company balance to the
 * card) or a withdrawal (`card_withdrawal`: from the card back to the company balance), in cents,
 * with its fee. A refusal throws before any money is set aside.
 */
export async function judgeCardMove(em: EntityManager, config: Config, caller: Caller, card: Card, move: Pick<CardTransaction, 'type' | 'amount' | 'feeAmount'>): Promise<void> {
  const funding = move.type === 'funding';
  await judgeMovement(em, config, caller, {
    operationType: funding ? 'card_funding' : 'card_withdrawal',
    txType: 'balance_transfer',
    source: funding ? { type: 'company_balance', environment: card.environment } : { type: 'card', id: card.id, environment: card.environment },
    destination: funding ? { address: card.id, type: 'card' } : { type: 'company_balance' },
    value: { asset: USD_CENTS, amount: BigInt(move.amount) },
    feeRaw: BigInt(move.feeAmount),
  });
}

/**
 * A fund or withdraw request: under the card's row lock, a known reference returns its original
 * transaction when the request is the same (card, type, amount) and is 409 idempotency_key_reused
 * when it is not; otherwise the movement gate judges it (judgeCardMove) and the money is set aside now (a company-balance reserve for a funding, a
 * card hold for a withdrawal) so concurrent requests cannot overspend, and a pending transaction
 * is written and its settlement workflow recorded. A card being terminated takes neither.
 * References are unique per company and environment.
 */
export async function requestBalanceMove(
  em: EntityManager,
  config: Config,
  tenant: Caller,
  cardId: string,
  request: { type: 'fund' | 'withdraw'; amount: number; reference: string },
): Promise<{ transaction: CardTransaction; card: Card }> {
  const card = await lockCard(em, tenant, cardId);
  const amount = BigInt(request.amount);
  // The transaction goes in first, unless its reference is taken; anything refused below rolls it back.
  const transaction = await insertPendingTransaction(em, card, {
    type: transactionTypeOf(request.type),
    amount: amount.toString(),
    feeAmount: fundingFee(amount, config.CARD_FUNDING_FEE_BPS).toString(),
    reference: request.reference,
  });
  if (!transaction) {
    const original = await em.findOneOrFail(CardTransaction, { ...tenantFilter(tenant), reference: request.reference });
    const differences = [
      ...(original.card.id !== card.id ? ['card'] : []),
      ...(original.type !== transactionTypeOf(request.type) ? ['type'] : []),
      ...(original.amount !== String(request.amount) ? ['amount'] : []),
    ];
    if (differences.length > 0) {
      throw errors.referenceReused(
        `Reference '${request.reference}' was already used for a different request (${differences.join(', ')} differ); use a new reference.`,
        'reference',
      );
    }
    return { transaction: original, card };
  }
  if (card.status === 'terminated') throw invalidStateTransition('A terminated card cannot be funded or withdrawn from.');
  if (card.terminationRequestedAt) throw invalidStateTransition('The card is being terminated; it cannot be funded or withdrawn from.');
  if (card.status === 'pending' || card.status === 'failed') throw invalidStateTransition(`The card is ${card.status}; wait until it is active.`);
  await judgeCardMove(em, config, tenant, card, transaction);
  if (request.type === 'fund') {
    await reserveFunding(em, card, transaction);
  } else {
    const spendable = BigInt(card.balance) - BigInt(card.held);
    if (spendable < amount) throw cardInsufficientFunds(amount, spendable);
    card.held = (BigInt(card.held) + amount).toString();
    await sql(em, 'update cards set held = $1, updated_at = now() where id = $2', [card.held, card.id]);
    await postCardMovement(em, card, { kind: 'hold', reference: cardTransactionReference(transaction.id), change: { available: -amount, held: amount } });
  }
  recordStart(em, cardBalanceFlow, { transactionId: transaction.id }, tenant.organizationId);
  return { transaction, card };
}

/**
 * Inserts a pending funding or withdrawal of the (locked) card unless its reference is taken in the
 * organization and environment, and returns it as inserted, or null. A concurrent request with the
 * same reference (the card lock serializes only one card's) waits for the other to commit and then
 * inserts nothing: the caller finds the original.
 */
async function insertPendingTransaction(
  em: EntityManager,
  card: Card,
  move: Pick<CardTransaction, 'type' | 'amount' | 'feeAmount'> & { reference: string },
): Promise<CardTransaction | null> {
  const now = new Date();
  const rows = await sql(
    em,
    `insert into card_transactions (id, organization_id, environment, card_id, type, status, amount, balance_before, balance_after, fee_amount, reference, created_at, updated_at)
     values ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $9, $10, $11, $12)
     on conflict (organization_id, environment, reference) do nothing returning *`,
    [uuid(), card.organization.id, card.environment, card.id, move.type, move.amount, card.balance, card.balance, move.feeAmount, move.reference, now, now],
  );
  return rows[0] ? detachedRow(em, CardTransaction, rows[0]) : null;
}

/**
 * Settles a pending funding or withdrawal after the issuer answered, exactly once: the card row
 * lock serializes it with requests and authorizations, and the transaction moves out of pending
 * by a conditional update, so a settled one is left alone. `pending` carries what never changes
 * (its card, type and amounts).
 */
export async function settleTransaction(
  em: EntityManager,
  pending: Pick<CardTransaction, 'id' | 'card' | 'type' | 'amount' | 'feeAmount'>,
  outcome: { ok: true } | { ok: false; reason: string },
) {
  // A caller that holds the card as an entity (failProvisioning) is shown it as it ends up; asked before the
  // settled transaction is mapped below, which puts a mere reference to the card in the identity map.
  const callerHoldsCard = em.getUnitOfWork().getById(Card.name, pending.card.id) !== undefined;
  // Detached (the balance is written back by a statement below), without its sealed secrets.
  const card = await readOneLocked(em, Card, { id: pending.card.id }, CARD_SECRETS);
  if (!card) throw new Error(`card ${pending.card.id} of transaction ${pending.id} not found`);
  const amount = BigInt(pending.amount);
  const fee = BigInt(pending.feeAmount);
  const before = BigInt(card.balance);
  const after = !outcome.ok ? before : pending.type === 'funding' ? before + amount : before - amount;
  card.balance = after.toString();
  if (pending.type === 'withdrawal') card.held = (BigInt(card.held) - amount).toString();
  // The transaction out of pending and the card's balance written back in one statement: the card
  // moves only with its transaction (a settled one matches nothing), and its row is locked above.
  const [settled] = await sql(
    em,
    `with settled as (
       update card_transactions set status = $1, failure_reason = $2, balance_before = $3, balance_after = $4, updated_at = now()
        where id = $5 and status = 'pending' returning *
     ), card as (
       update cards set balance = $4, held = $6, updated_at = now() where id = $7 and exists (select 1 from settled) returning 1
     )
     select * from settled where exists (select 1 from card)`,
    [outcome.ok ? 'completed' : 'failed', outcome.ok ? null : outcome.reason, before.toString(), card.balance, pending.id, card.held, card.id],
  );
  if (!settled) return em.findOneOrFail(CardTransaction, { id: pending.id });
  const transaction = detachedRow(em, CardTransaction, settled);
  const organizationId = card.organization.id;
  const reference = cardTransactionReference(transaction.id);
  const company = { organizationId, environment: card.environment, currency: 'usd', reference } as const;
  // One posting each: a funding goes from the company's reserve to the card (its fee to card_fees), a withdrawal from the card's hold to the company.
  if (transaction.type === 'funding') {
    const against = outcome.ok ? [...cardLines(card.id, { available: amount }), cardFeeLine(card, fee)] : [];
    await applyBalanceEntry(em, { ...company, kind: outcome.ok ? 'capture' : 'release', amount: amount + fee, against });
  } else if (!outcome.ok) {
    await postCardMovement(em, card, { kind: 'release', reference, change: { available: amount, held: -amount } });
  } else if (amount > fee) {
    await applyBalanceEntry(em, { ...company, kind: 'credit', amount: amount - fee, against: [...cardLines(card.id, { held: -amount }), cardFeeLine(card, fee)] });
  } else {
    // The fee takes it all: nothing reaches the company balance.
    await postCardMovement(em, card, { kind: 'withdrawal', reference, change: { held: -amount }, counterparty: 'card_fees' });
  }
  if (callerHoldsCard) em.map(Card, (await sql(em, 'select * from cards where id = $1', [card.id]))[0]!);
  await emit(em, {
    organizationId, environment: card.environment,
    type: outcome.ok ? 'card.transaction.completed' : 'card.transaction.failed',
    data: { card_id: card.id, transaction: presentTransaction(transaction, card) },
    destinations: cardDestinations(card),
    dedupeKey: `card.transaction:${transaction.id}`,
  });
  return transaction;
}
