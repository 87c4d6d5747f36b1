import { LockMode, type FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../http/context';
import { DomainError, errors } from '../shared/errors';
import { applyBalanceEntry } from '../balances/service';
import { registerDestinationResolver } from '../events/destinations';
import { newSigningSecrets, signingSecretsAt } from '../events/secrets';
import { emit } from '../events/service';
import { Organization } from '../organizations/entities';
import { isUuid, prefixedId } from '../shared/ids';
import { centsToDecimalString, decimalStringToCents, Money } from '../shared/money';
import type { Page } from '../shared/pagination';
import { iso, isoOrNull } from '../shared/time';
import { Card, CardTransaction, Customer, type SealedCardSecrets, type SpendLimits, type SpendLimitWindow, SPEND_LIMIT_WINDOWS } from './entities';
import type { CreateCardBody, CustomerInput } from './schemas';
import type { MintedCard } from './issuer';
import type { z } from '../shared/schemas';

/** Company-balance journal references: the card transaction id makes every movement idempotent. */
export const cardTransactionReference = (transactionId: string) => ({ type: 'card_transaction', id: transactionId });
export const cardTerminationReference = (cardId: string) => ({ type: 'card_termination', id: cardId });

/** The initial funding's reference (client references are per company, so this cannot collide with a card id in it). */
export const initialFundingReference = (cardId: string) => `initial-funding:${cardId}`;

export const COOLING_PERIOD_MS = 24 * 60 * 60 * 1000;

/** The funding fee: `bps` basis points of the amount, rounded down to the cent. */
export const fundingFee = (amount: bigint, bps: number): bigint => (amount * BigInt(bps)) / 10_000n;

export const invalidStateTransition = (message: string) => errors.conflict('invalid_state_transition', message);

export const cardInsufficientFunds = (needed: bigint, available: bigint) =>
  new DomainError({
    kind: 'invalid',
    code: 'insufficient_funds',
    message: 'The card balance is insufficient for this withdrawal.',
    details: { currency: 'usd', required: needed.toString(), available: available.toString() },
  });

/** The caller's card, or 404 (another company's card and a malformed id look the same). */
export async function findCard(em: EntityManager, organizationId: string, cardId: string, lock = false): Promise<Card> {
  if (!isUuid(cardId)) throw errors.notFound('card', cardId, 'cardId');
  const card = await em.findOne(
    Card,
    { id: cardId, organization: organizationId },
    { populate: ['customer'], ...(lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}) },
  );
  if (!card) throw errors.notFound('card', cardId, 'cardId');
  return card;
}

export async function findCustomer(em: EntityManager, organizationId: string, customerId: string): Promise<Customer> {
  const customer = isUuid(customerId) ? await em.findOne(Customer, { id: customerId, organization: organizationId }) : null;
  if (!customer) throw errors.notFound('customer', customerId, 'customerId');
  return customer;
}

/** The customer with the same identity document in this company, else a new one. */
async function customerFor(em: EntityManager, organizationId: string, input: CustomerInput): Promise<Customer> {
  const existing = await em.findOne(Customer, { organization: organizationId, idType: input.id_type, idNumber: input.id_number, country: input.country });
  if (existing) return existing;
  const address = { line1: input.line1, line2: input.line2 ?? null, city: input.city, state: input.state, postal_code: input.postal_code, country: input.country };
  return em.create(Customer, {
    organization: em.getReference(Organization, organizationId),
    customerType: input.customer_type,
    firstName: input.first_name,
    lastName: input.last_name,
    email: input.email,
    phoneNumber: input.phone_number,
    dialCode: input.dial_code,
    dateOfBirth: input.date_of_birth,
    idType: input.id_type,
    idNumber: input.id_number,
    address,
    country: input.country,
  });
}

const LIMIT_INPUT_NAMES: Record<string, SpendLimitWindow> = {
  single_transaction: 'transaction',
  daily: 'daily',
  weekly: 'weekly',
  monthly: 'monthly',
  yearly: 'yearly',
  all_time: 'all_time',
};

/**
 * Creates the customer (or reuses it), the pending card and its initial funding transaction, and
 * reserves that funding (plus fee) on the company balance now, so the card cannot be created
 * against money that is not there. The provisioning workflow does the rest.
 */
export async function createCard(
  em: EntityManager,
  auth: AuthContext,
  body: z.infer<typeof CreateCardBody>,
  feeBps: number,
): Promise<{ card: Card; initialFunding: CardTransaction | null; webhookSecret: string | null }> {
  const customer = await customerFor(em, auth.organizationId, body.customer);
  const spendingLimits: SpendLimits = {};
  for (const [name, value] of Object.entries(body.card_limits ?? {})) {
    if (value === undefined) continue;
    const cents = decimalStringToCents(value);
    if (cents <= 0n) throw errors.validation('Card limits must be positive', `card_limits.${name}`);
    spendingLimits[LIMIT_INPUT_NAMES[name]!] = cents.toString();
  }
  const { secrets, plaintext } = newSigningSecrets();
  const card = em.create(Card, {
    organization: em.getReference(Organization, auth.organizationId),
    customer,
    environment: auth.environment,
    cardType: body.card_type,
    name: body.name,
    preferredName: body.name,
    currency: body.currency,
    cardBrand: 'visa',
    initialAmount: String(body.amount),
    contactlessPayment: body.contactless_payment ?? body.card_type === 'physical',
    spendingLimits,
    reference: prefixedId('cref'),
    webhookUrl: body.webhook_url ?? null,
    webhookSecrets: secrets,
    apiVersion: auth.apiVersion,
    userMetadata: typeof body.user_metadata === 'string' ? body.user_metadata : JSON.stringify(body.user_metadata ?? {}),
    billingAddress: customer.address,
    createdBy: body.created_by ?? null,
  });
  let initialFunding: CardTransaction | null = null;
  if (body.amount > 0) {
    initialFunding = em.create(CardTransaction, {
      organization: card.organization,
      card,
      type: 'funding',
      status: 'pending',
      amount: String(body.amount),
      feeAmount: fundingFee(BigInt(body.amount), feeBps).toString(),
      balanceBefore: '0',
      balanceAfter: '0',
      reference: initialFundingReference(card.id),
    });
    await reserveFunding(em, auth.organizationId, initialFunding);
  }
  await em.flush();
  await emit(em, { organizationId: auth.organizationId, type: 'card.created', data: presentCard(card), destinations: cardDestinations(card) });
  return { card, initialFunding, webhookSecret: card.webhookUrl ? plaintext : null };
}

async function reserveFunding(em: EntityManager, organizationId: string, transaction: CardTransaction): Promise<void> {
  await applyBalanceEntry(em, {
    organizationId,
    currency: 'usd',
    kind: 'reserve',
    amount: BigInt(transaction.amount) + BigInt(transaction.feeAmount),
    reference: cardTransactionReference(transaction.id),
  });
}

/**
 * A fund or withdraw request: under the card's row lock, a known reference returns its original
 * transaction; otherwise the money is set aside now (a company-balance reserve for a funding, a
 * card hold for a withdrawal) so concurrent requests cannot overspend, and a pending transaction
 * is written for the settlement workflow.
 */
export async function requestBalanceMove(
  em: EntityManager,
  organizationId: string,
  cardId: string,
  request: { type: 'fund' | 'withdraw'; amount: number; reference: string },
  feeBps: number,
): Promise<{ transaction: CardTransaction; created: boolean }> {
  const card = await findCard(em, organizationId, cardId, true);
  const original = await em.findOne(CardTransaction, { organization: organizationId, reference: request.reference });
  if (original) {
    if (original.card.id !== card.id) {
      throw errors.conflict('idempotency_key_reused', `Reference '${request.reference}' was already used for another card.`);
    }
    return { transaction: original, created: false };
  }
  if (card.status === 'terminated') throw invalidStateTransition('A terminated card cannot be funded or withdrawn from.');
  if (card.status === 'pending' || card.status === 'failed') throw invalidStateTransition(`The card is ${card.status}; wait until it is active.`);
  const amount = BigInt(request.amount);
  const transaction = em.create(CardTransaction, {
    organization: card.organization,
    card,
    type: request.type === 'fund' ? 'funding' : 'withdrawal',
    status: 'pending',
    amount: amount.toString(),
    feeAmount: fundingFee(amount, feeBps).toString(),
    balanceBefore: card.balance,
    balanceAfter: card.balance,
    reference: request.reference,
  });
  if (request.type === 'fund') {
    await reserveFunding(em, organizationId, transaction);
  } else {
    const spendable = BigInt(card.balance) - BigInt(card.held);
    if (spendable < amount) throw cardInsufficientFunds(amount, spendable);
    card.held = (BigInt(card.held) + amount).toString();
  }
  await em.flush();
  return { transaction, created: true };
}

/**
 * Settles a pending funding or withdrawal after the issuer answered, exactly once: the card row
 * lock serializes it with requests and authorizations, and a settled transaction is left alone.
 */
export async function settleTransaction(em: EntityManager, transactionId: string, outcome: { ok: true } | { ok: false; reason: string }) {
  const transaction = await em.findOneOrFail(CardTransaction, { id: transactionId });
  const card = await em.findOneOrFail(Card, { id: transaction.card.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['customer'] });
  await em.refresh(transaction);
  if (transaction.status !== 'pending') return transaction;
  const organizationId = card.organization.id;
  const amount = BigInt(transaction.amount);
  const fee = BigInt(transaction.feeAmount);
  const reference = cardTransactionReference(transaction.id);
  const before = BigInt(card.balance);
  let after = before;
  if (transaction.type === 'funding') {
    await applyBalanceEntry(em, { organizationId, currency: 'usd', kind: outcome.ok ? 'capture' : 'release', amount: amount + fee, reference });
    if (outcome.ok) after = before + amount;
  } else {
    card.held = (BigInt(card.held) - amount).toString();
    if (outcome.ok) {
      after = before - amount;
      if (amount > fee) await applyBalanceEntry(em, { organizationId, currency: 'usd', kind: 'credit', amount: amount - fee, reference });
    }
  }
  card.balance = after.toString();
  transaction.balanceBefore = before.toString();
  transaction.balanceAfter = after.toString();
  transaction.status = outcome.ok ? 'completed' : 'failed';
  transaction.failureReason = outcome.ok ? null : outcome.reason;
  await em.flush();
  await emit(em, {
    organizationId,
    type: outcome.ok ? 'card.transaction.completed' : 'card.transaction.failed',
    data: { card_id: card.id, transaction: presentTransaction(transaction, card) },
    destinations: cardDestinations(card),
    dedupeKey: `card.transaction:${transaction.id}`,
  });
  return transaction;
}

/** Activates a provisioned card with its sealed PAN and CVV, once (a card no longer processing is left alone). */
export async function activateCard(em: EntityManager, cardId: string, minted: MintedCard, sealed: SealedCardSecrets): Promise<Card> {
  const card = await em.findOneOrFail(Card, { id: cardId }, { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['customer'] });
  if (card.createdStatus !== 'processing') return card;
  card.secrets = sealed;
  card.cardBrand = minted.brand;
  card.lastFour = minted.pan.slice(-4);
  card.maskedPan = `${minted.pan.slice(0, 6)}${'*'.repeat(minted.pan.length - 10)}${minted.pan.slice(-4)}`;
  card.status = 'active';
  card.createdStatus = 'completed';
  await em.flush();
  return card;
}

/**
 * The issuer refused the card: status failed / created_status failed, the initial funding failed
 * (its reserve released) and a card.provisioning_failed event; once.
 */
export async function failProvisioning(em: EntityManager, cardId: string, reason: string): Promise<Card> {
  const card = await em.findOneOrFail(Card, { id: cardId }, { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['customer'] });
  if (card.createdStatus !== 'processing') return card;
  card.status = 'failed';
  card.createdStatus = 'failed';
  card.failureReason = reason;
  await em.flush();
  const initial = await em.findOne(CardTransaction, { card, reference: initialFundingReference(cardId) });
  if (initial) await settleTransaction(em, initial.id, { ok: false, reason: 'card_provisioning_failed' });
  await emit(em, { organizationId: card.organization.id, type: 'card.provisioning_failed', data: presentCard(card), destinations: cardDestinations(card) });
  return card;
}

/**
 * Terminates the card and returns its balance to the company balance, once (a terminated card is
 * returned as it is). The cooling period is checked by the termination workflow on workflow time.
 */
export async function terminateCard(em: EntityManager, cardId: string, reason: string | null, now: Date): Promise<Card> {
  const card = await em.findOneOrFail(Card, { id: cardId }, { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['customer'] });
  if (card.status === 'terminated') return card;
  const remaining = BigInt(card.balance) - BigInt(card.held);
  if (remaining > 0n) {
    await applyBalanceEntry(em, { organizationId: card.organization.id, currency: 'usd', kind: 'credit', amount: remaining, reference: cardTerminationReference(card.id) });
  }
  card.balance = card.held;
  card.remainingBalance = remaining.toString();
  card.status = 'terminated';
  card.terminatedAt = now;
  card.terminationReason = reason;
  await em.flush();
  await emit(em, { organizationId: card.organization.id, type: 'card.terminated', data: presentTermination(card), destinations: cardDestinations(card) });
  return card;
}

export const cardDestinations = (card: Card) => (card.webhookUrl ? [{ kind: 'card' as const, id: card.id, url: card.webhookUrl }] : []);

/** Freeze (active → frozen) or unfreeze (frozen → active); repeating the current status is a no-op. */
export async function updateCardStatus(em: EntityManager, organizationId: string, cardId: string, status: string): Promise<Card> {
  if (status !== 'frozen' && status !== 'active') {
    throw new DomainError({
      kind: 'invalid',
      code: 'invalid_status',
      message: `status must be 'frozen' or 'active', got '${status}'.`,
      param: 'status',
    });
  }
  const card = await findCard(em, organizationId, cardId, true);
  if (card.status === status) return card;
  if (card.status !== 'active' && card.status !== 'frozen') {
    throw invalidStateTransition(`A ${card.status} card cannot be ${status === 'frozen' ? 'frozen' : 'unfrozen'}.`);
  }
  card.status = status;
  await em.flush();
  await emit(em, { organizationId, type: status === 'frozen' ? 'card.frozen' : 'card.unfrozen', data: presentCard(card), destinations: cardDestinations(card) });
  return card;
}

export async function setSpendLimits(em: EntityManager, organizationId: string, cardId: string, limits: Partial<Record<SpendLimitWindow, number | null>>) {
  const card = await findCard(em, organizationId, cardId, true);
  if (card.status === 'terminated') throw invalidStateTransition('A terminated card cannot be changed.');
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
export function windowStart(window: Exclude<SpendLimitWindow, 'transaction'>, at: Date): Date | null {
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

/**
 * A merchant authorization (sandbox helper): approved only when the card is active, its spendable
 * balance covers it and no limit window would be exceeded; recorded either way as a purchase.
 */
export async function authorizePurchase(
  em: EntityManager,
  organizationId: string,
  cardId: string,
  request: { amount: number; merchantName: string | null; at: Date },
): Promise<{ transaction: CardTransaction; declineReason: string | null }> {
  const card = await findCard(em, organizationId, cardId, true);
  const amount = BigInt(request.amount);
  const before = BigInt(card.balance);
  const declineReason = await declineReasonFor(em, card, amount, request.at);
  const after = declineReason ? before : before - amount;
  card.balance = after.toString();
  const transaction = em.create(CardTransaction, {
    organization: card.organization,
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
    organizationId,
    type: 'card.authorization',
    data: { card_id: card.id, approved: declineReason === null, decline_reason: declineReason, transaction: presentTransaction(transaction, card) },
    destinations: cardDestinations(card),
  });
  return { transaction, declineReason };
}

async function declineReasonFor(em: EntityManager, card: Card, amount: bigint, at: Date): Promise<string | null> {
  if (card.status === 'frozen') return 'card_frozen';
  if (card.status !== 'active') return 'card_not_active';
  if (BigInt(card.balance) - BigInt(card.held) < amount) return 'insufficient_funds';
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

/** The /api page_info of a keyset page. */
export const pageInfo = (page: Page<unknown>, limit: number) => ({ next_cursor: page.nextCursor, has_more: page.hasMore, limit });

const escapeLike = (value: string) => value.replace(/[\\%_]/g, (character) => `\\${character}`);

export function cardListFilter(organizationId: string, query: { card_type?: string; status?: string; search?: string }): FilterQuery<Card> {
  const where: Record<string, unknown> = { organization: organizationId };
  if (query.card_type) where.cardType = query.card_type;
  if (query.status) where.status = query.status;
  if (query.search) {
    const pattern = `%${escapeLike(query.search)}%`;
    where.$or = [
      ...(/^\d{4}$/.test(query.search) ? [{ lastFour: query.search }] : []),
      { name: { $ilike: pattern } },
      { customer: { firstName: { $ilike: pattern } } },
      { customer: { lastName: { $ilike: pattern } } },
    ];
  }
  return where as FilterQuery<Card>;
}

const presentLimits = (limits: SpendLimits) =>
  Object.fromEntries(Object.entries(limits).map(([window, cents]) => [window === 'transaction' ? 'single_transaction' : window, cents]));

export function presentCard(card: Card) {
  return {
    id: card.id,
    company_id: card.organization.id,
    customer_id: card.customer.id,
    card_type: card.cardType,
    card_brand: card.cardBrand,
    status: card.status,
    created_status: card.createdStatus,
    name: card.name,
    preferred_name: card.preferredName,
    masked_pan: card.maskedPan,
    last_four: card.lastFour ?? null,
    balance_amount: card.balance,
    balance_currency: card.currency,
    display_amount: new Money(centsToDecimalString(BigInt(card.balance))).toNumber(),
    contactless_payment: card.contactlessPayment,
    spending_limits: presentLimits(card.spendingLimits),
    reference: card.reference,
    webhook_url: card.webhookUrl ?? null,
    user_metadata: card.userMetadata,
    billing_address: card.billingAddress,
    created_by: card.createdBy ?? null,
    failure_reason: card.failureReason ?? null,
    terminated_at: isoOrNull(card.terminatedAt),
    created_at: iso(card.createdAt),
    updated_at: iso(card.updatedAt),
  };
}

export function presentSlimCard(card: Card) {
  const full = presentCard(card);
  return {
    id: full.id,
    status: full.status,
    masked_pan: full.masked_pan,
    balance_amount: full.balance_amount,
    card_brand: full.card_brand,
    name: full.name,
    reference: full.reference,
    display_amount: full.display_amount,
  };
}

export function presentTransaction(transaction: CardTransaction, card: Card) {
  return {
    id: transaction.id,
    card_id: card.id,
    type: transaction.type,
    status: transaction.status,
    amount: transaction.amount,
    balance_before: transaction.balanceBefore,
    balance_after: transaction.balanceAfter,
    fee_amount: transaction.feeAmount,
    fee_type: transaction.type === 'purchase' ? null : ('funding_fee' as const),
    currency: card.currency,
    reference: transaction.reference ?? null,
    merchant_name: transaction.merchantName ?? null,
    decline_reason: transaction.failureReason ?? null,
    created_at: iso(transaction.createdAt),
    updated_at: iso(transaction.updatedAt),
  };
}

export function presentCustomer(customer: Customer) {
  return {
    id: customer.id,
    company_id: customer.organization.id,
    customer_type: customer.customerType,
    first_name: customer.firstName,
    last_name: customer.lastName,
    email: customer.email,
    phone_number: customer.phoneNumber,
    dial_code: customer.dialCode,
    date_of_birth: customer.dateOfBirth,
    id_type: customer.idType,
    ...customer.address,
    created_at: iso(customer.createdAt),
  };
}

export function presentCustomerCardEntry(card: Card) {
  return {
    id: card.id,
    customer_id: card.customer.id,
    card_type: card.cardType,
    card_brand: card.cardBrand,
    last_four: card.lastFour ?? null,
    currency: card.currency,
    status: card.status,
    balance: card.balance,
    created_at: iso(card.createdAt),
  };
}

export function presentTermination(card: Card) {
  return {
    card_id: card.id,
    status: 'terminated' as const,
    remaining_balance: card.remainingBalance ?? '0',
    balance_returned: BigInt(card.remainingBalance ?? '0') > 0n,
    terminated_at: iso(card.terminatedAt!),
    reason: card.terminationReason ?? null,
  };
}

/** Card deliveries sign with the card's own secret (shown once at creation) at the creating key's version. */
registerDestinationResolver('card', {
  async resolve(em, config, organizationId, id) {
    const card = await em.findOne(Card, { id, organization: organizationId });
    if (!card?.webhookUrl) return null;
    return {
      url: card.webhookUrl,
      secrets: signingSecretsAt(card.webhookSecrets),
      apiVersion: card.apiVersion,
      policy: { environment: card.environment, allowInsecureLoopback: config.WEBHOOK_ALLOW_INSECURE_LOOPBACK },
      inactiveReason: null,
    };
  },
  async markGone(em, id) {
    // 410 from a card's webhook_url: stop sending lifecycle events there; the card itself is unaffected.
    await em.nativeUpdate(Card, { id }, { webhookUrl: null });
  },
});
