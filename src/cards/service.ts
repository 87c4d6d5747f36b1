import { LockMode, type FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { applyBalanceEntry } from '../balances/service';
import type { Config } from '../config';
import { newSigningSecrets } from '../events/secrets';
import { emit, validatedUrl } from '../events/service';
import { checkDestinationUrl } from '../events/url-policy';
import type { KeyProvider } from '../keys/provider';
import { detachedRow, findOneByColumns, readOneByColumns, readOneLocked, sql } from '../db/lean';
import { judgeMovement, USD_CENTS } from '../movements/gate';
import { Organization } from '../organizations/entities';
import type { Caller } from '../policies/service';
import { DomainError, errors } from '../shared/errors';
import { isUuid, prefixedId, uuid } from '../shared/ids';
import type { Page } from '../shared/pagination';
import type { z } from '../shared/schemas';
import { recordStart } from '../temporal/starter';
import { Card, CardTransaction, Customer, type SealedCardSecrets } from './entities';
import { cardBalanceFlow } from './flows/balance';
import { cardProvisioningFlow } from './flows/provisioning';
import { CARD_COOLING_PERIOD_MS, cardTerminationFlow } from './flows/termination';
import type { MintedCard } from './issuer';
import { recordIssuerSync } from './issuer-sync';
import { initialFundingReference, presentCard, presentTermination, presentTransaction } from './presenters';
import type { CreateCardBody, CustomerInput } from './schemas';
import { limitsFromDecimals } from './spend-limits';
import { lockingOnlyItsRow } from '../db/row-lock';

/** Company-balance journal references: the card transaction id makes every movement idempotent. */
const cardTransactionReference = (transactionId: string) => ({ type: 'card_transaction', id: transactionId });
const cardTerminationReference = (cardId: string) => ({ type: 'card_termination', id: cardId });

/** The funding fee: `bps` basis points of the amount, rounded down to the cent. */
const fundingFee = (amount: bigint, bps: number): bigint => (amount * BigInt(bps)) / 10_000n;

export const invalidStateTransition = (message: string) => errors.conflict('invalid_state_transition', message);

const cardInsufficientFunds = (needed: bigint, available: bigint) =>
  new DomainError({
    kind: 'invalid',
    code: 'insufficient_funds',
    message: 'The card balance is insufficient for this withdrawal.',
    details: { currency: 'USD', unit: 'cent', required: needed.toString(), available: available.toString() },
  });

export const cardDestinations = (card: Card) => (card.webhookUrl ? [{ kind: 'card' as const, id: card.id, url: card.webhookUrl }] : []);

/** When the 24-hour cooling period after creation ends. */
export const terminableAt = (card: Card) => new Date(card.createdAt.getTime() + CARD_COOLING_PERIOD_MS);

/** Whose and which environment's cards a request may see and touch: the calling key's. */
export type CardTenant = Pick<AuthContext, 'organizationId' | 'environment'>;

/** Every card, customer and card transaction lookup filters by both: the other environment's record is another company's. */
export const tenantFilter = (tenant: CardTenant) => ({ organization: tenant.organizationId, environment: tenant.environment });

/** The caller's card, or 404 (another company's or the other environment's card and a malformed id look the same). */
export async function findCard(em: EntityManager, tenant: CardTenant, cardId: string, lock = false): Promise<Card> {
  if (!isUuid(cardId)) throw errors.notFound('card', cardId, 'cardId');
  const card = lock
    ? await em.findOne(Card, { id: cardId, ...tenantFilter(tenant) }, { populate: ['customer'], ...lockingOnlyItsRow(em, Card) })
    : await findOneByColumns(em, Card, { id: cardId, ...tenantFilter(tenant) });
  if (!card) throw errors.notFound('card', cardId, 'cardId');
  // Unlocked reads present the card alone: its customer is a reference, whose id the card's row holds.
  return card;
}

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

/** What a presented card never needs: its sealed PAN and CVV, and its webhook signing secrets. */
const CARD_SECRETS = ['secrets', 'webhookSecrets'] as const;

/**
 * The card as its row says, detached (src/db/lean.ts), its secrets neither read nor set: for a read that
 * presents it and passes it to no entity manager.
 */
export async function readCard(em: EntityManager, tenant: CardTenant, cardId: string): Promise<Card> {
  const card = isUuid(cardId) ? await readOneByColumns(em, Card, { id: cardId, ...tenantFilter(tenant) }, CARD_SECRETS) : null;
  if (!card) throw errors.notFound('card', cardId, 'cardId');
  return card;
}

export async function findCustomer(em: EntityManager, tenant: CardTenant, customerId: string): Promise<Customer> {
  const customer = isUuid(customerId) ? await findOneByColumns(em, Customer, { id: customerId, ...tenantFilter(tenant) }) : null;
  if (!customer) throw errors.notFound('customer', customerId, 'customerId');
  return customer;
}

/**
 * The customer with the same identity document in this company and environment, else a new one.
 * A transaction-scoped advisory lock on the identity serializes concurrent creations, so two
 * requests for a new cardholder share one customer instead of one failing on the unique key.
 */
async function customerFor(em: EntityManager, tenant: CardTenant, input: CustomerInput): Promise<Customer> {
  const identity = ['card-customer', tenant.organizationId, tenant.environment, input.id_type, input.id_number, input.country].join('|');
  await em.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [identity], 'run');
  const existing = await em.findOne(Customer, { ...tenantFilter(tenant), idType: input.id_type, idNumber: input.id_number, country: input.country });
  if (existing) return existing;
  const address = { line1: input.line1, line2: input.line2 ?? null, city: input.city, state: input.state, postal_code: input.postal_code, country: input.country };
  return em.create(Customer, {
    organization: em.getReference(Organization, tenant.organizationId),
    environment: tenant.environment,
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

/** Who creates a card: the calling key (the initial funding's initiator), its organization, environment (the card's world and its webhook URL policy) and API version (payloads). */
export interface CardCreator extends Caller {
  apiVersion: string;
}

/** What the deployment decides about card creation. */
export interface CardCreationOptions {
  /** The funding fee (CARD_FUNDING_FEE_BPS) and what the movement gate reads. */
  config: Config;
  /** Sandbox webhook_url may be http(s) to loopback (WEBHOOK_ALLOW_INSECURE_LOOPBACK). */
  allowInsecureLoopback: boolean;
  /** Seals the card's webhook signing secret at rest. */
  keys: KeyProvider;
  /** A live card issuer is configured: without one a live card is refused (503 card_issuer_unavailable). */
  liveIssuer: boolean;
}

const cardIssuerUnavailable = () =>
  new DomainError({
    kind: 'unavailable',
    code: 'card_issuer_unavailable',
    message: 'No live card issuer is configured: live cards need Stripe Issuing (STRIPE_ISSUING_SECRET_KEY and STRIPE_ISSUING_WEBHOOK_SECRET).',
  });

/**
 * Creates the customer (or reuses it), the pending card and its initial funding transaction, and
 * reserves that funding (plus fee) on the company balance of the creator's environment now, so
 * the card cannot be created against money that is not there; the funding is judged by the
 * movement gate first (`card_funding`). The webhook_url must pass the same
 * URL policy as webhook endpoints. The provisioning workflow, recorded here, does the rest.
 */
export async function createCard(
  em: EntityManager,
  creator: CardCreator,
  body: z.infer<typeof CreateCardBody>,
  options: CardCreationOptions,
): Promise<{ card: Card; initialFunding: CardTransaction | null; webhookSecret: string | null }> {
  const spendingLimits = limitsFromDecimals(body.card_limits ?? {});
  if (body.webhook_url !== undefined) {
    const policy = { environment: creator.environment, allowInsecureLoopback: options.allowInsecureLoopback };
    await validatedUrl('webhook_url', () => checkDestinationUrl(body.webhook_url!, policy));
  }
  // After the checks of the request itself, before anything is written.
  if (creator.environment === 'live' && !options.liveIssuer) throw cardIssuerUnavailable();
  const customer = await customerFor(em, creator, body.customer);
  const { secrets, plaintext } = await newSigningSecrets(options.keys, creator.organizationId);
  const card = em.create(Card, {
    organization: em.getReference(Organization, creator.organizationId),
    customer,
    environment: creator.environment,
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
    apiVersion: creator.apiVersion,
    userMetadata: typeof body.user_metadata === 'string' ? body.user_metadata : JSON.stringify(body.user_metadata ?? {}),
    billingAddress: customer.address,
    createdBy: body.created_by ?? null,
  });
  let initialFunding: CardTransaction | null = null;
  if (body.amount > 0) {
    initialFunding = em.create(CardTransaction, {
      organization: card.organization,
      environment: card.environment,
      card,
      type: 'funding',
      status: 'pending',
      amount: String(body.amount),
      feeAmount: fundingFee(BigInt(body.amount), options.config.CARD_FUNDING_FEE_BPS).toString(),
      balanceBefore: '0',
      balanceAfter: '0',
      reference: initialFundingReference(card.id),
    });
    await judgeCardMove(em, options.config, creator, card, initialFunding);
    await reserveFunding(em, card, initialFunding);
  }
  await em.flush();
  recordStart(em, cardProvisioningFlow, { cardId: card.id }, creator.organizationId);
  await emit(em, { organizationId: creator.organizationId, environment: card.environment, type: 'card.created', data: presentCard(card), destinations: cardDestinations(card) });
  return { card, initialFunding, webhookSecret: card.webhookUrl ? plaintext : null };
}

async function reserveFunding(em: EntityManager, card: Card, transaction: CardTransaction): Promise<void> {
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
async function judgeCardMove(em: EntityManager, config: Config, caller: Caller, card: Card, move: Pick<CardTransaction, 'type' | 'amount' | 'feeAmount'>): Promise<void> {
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
  if (transaction.type === 'funding') {
    await applyBalanceEntry(em, { organizationId, environment: card.environment, currency: 'usd', kind: outcome.ok ? 'capture' : 'release', amount: amount + fee, reference });
  } else if (outcome.ok && amount > fee) {
    await applyBalanceEntry(em, { organizationId, environment: card.environment, currency: 'usd', kind: 'credit', amount: amount - fee, reference });
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

/** Activates a provisioned card with its sealed PAN and CVV (when the issuer handed them over) and the issuer's ids, once (a card no longer processing is left alone). */
export async function activateCard(em: EntityManager, cardId: string, minted: MintedCard, sealed: SealedCardSecrets | null): Promise<Card> {
  const card = await em.findOneOrFail(Card, { id: cardId }, { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['customer'] });
  if (card.createdStatus !== 'processing') return card;
  card.secrets = sealed;
  card.cardBrand = minted.brand;
  card.lastFour = minted.lastFour;
  card.maskedPan = minted.maskedPan;
  card.issuerCardId = minted.issuerCardId;
  if (minted.issuerCardholderId) card.customer.issuerCardholderId = minted.issuerCardholderId;
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
  const card = await em.findOneOrFail(Card, { id: cardId }, { ...lockingOnlyItsRow(em, Card), populate: ['customer'] });
  if (card.createdStatus !== 'processing') return card;
  card.status = 'failed';
  card.createdStatus = 'failed';
  card.failureReason = reason;
  await em.flush();
  const initial = await em.findOne(CardTransaction, { card, reference: initialFundingReference(cardId) });
  if (initial) await settleTransaction(em, initial, { ok: false, reason: 'card_provisioning_failed' });
  await emit(em, { organizationId: card.organization.id, environment: card.environment, type: 'card.provisioning_failed', data: presentCard(card), destinations: cardDestinations(card) });
  return card;
}

/**
 * DELETE /api/cards/:cardId: decides under the card lock, so nothing is started for a refusal and
 * no funding can slip in between the check and the termination. Early (409
 * card_termination_cooling_period, details.terminable_at), pending, failed, terminated or with
 * fundings or withdrawals still settling (409 invalid_state_transition): refused. Otherwise the
 * card is marked terminating (it takes no more fundings, withdrawals or purchases) and the
 * termination workflow recorded. A repeat while it terminates returns the card as it is.
 */
export async function requestTermination(em: EntityManager, tenant: CardTenant, cardId: string, reason: string | null, now = new Date()): Promise<Card> {
  const card = await findCard(em, tenant, cardId, true);
  if (card.status === 'terminated') throw invalidStateTransition('The card is already terminated.');
  if (card.terminationRequestedAt) return card;
  if (card.status === 'pending' || card.status === 'failed') throw invalidStateTransition(`A ${card.status} card cannot be terminated.`);
  const terminable = terminableAt(card);
  if (now < terminable) {
    throw errors.conflict(
      'card_termination_cooling_period',
      `A card can be terminated 24 hours after creation; freeze it in the meantime. Terminable at ${terminable.toISOString()}.`,
      { terminable_at: terminable.toISOString() },
    );
  }
  if ((await em.count(CardTransaction, { card, status: 'pending' })) > 0) {
    throw invalidStateTransition('The card has fundings or withdrawals still settling; terminate it once they have completed.');
  }
  card.terminationRequestedAt = now;
  card.terminationReason = reason;
  await em.flush();
  recordStart(em, cardTerminationFlow, { cardId: card.id, terminableAt: terminable.toISOString() }, tenant.organizationId);
  return card;
}

/**
 * The termination workflow's step: returns `balance - held` to the company balance and marks the
 * card terminated, once (a terminated card is returned as it is). Re-checked under the card lock;
 * what cannot be terminated yet throws a plain (retried) error, never a refusal.
 */
export async function terminateCard(em: EntityManager, cardId: string, now: Date): Promise<Card> {
  const card = await em.findOneOrFail(Card, { id: cardId }, { ...lockingOnlyItsRow(em, Card), populate: ['customer'] });
  if (card.status === 'terminated') return card;
  if (now < terminableAt(card)) throw new Error(`card ${card.id} is in its cooling period until ${terminableAt(card).toISOString()}`);
  if ((await em.count(CardTransaction, { card, status: 'pending' })) > 0) throw new Error(`card ${card.id} has transactions still settling`);
  const remaining = BigInt(card.balance) - BigInt(card.held);
  if (remaining > 0n) {
    await applyBalanceEntry(em, { organizationId: card.organization.id, environment: card.environment, currency: 'usd', kind: 'credit', amount: remaining, reference: cardTerminationReference(card.id) });
  }
  card.balance = card.held;
  card.remainingBalance = remaining.toString();
  card.status = 'terminated';
  card.terminationRequestedAt ??= now;
  card.terminatedAt = now;
  await em.flush();
  await emit(em, { organizationId: card.organization.id, environment: card.environment, type: 'card.terminated', data: presentTermination(card), destinations: cardDestinations(card) });
  return card;
}

/** Freeze (active → frozen) or unfreeze (frozen → active); repeating the current status is a no-op. */
export async function updateCardStatus(em: EntityManager, tenant: CardTenant, cardId: string, status: string): Promise<Card> {
  if (status !== 'frozen' && status !== 'active') {
    throw new DomainError({
      kind: 'invalid',
      code: 'invalid_status',
      message: `status must be 'frozen' or 'active', got '${status}'.`,
      param: 'status',
    });
  }
  const card = await findCard(em, tenant, cardId, true);
  if (card.status === status) return card;
  if (card.status !== 'active' && card.status !== 'frozen') {
    throw invalidStateTransition(`A ${card.status} card cannot be ${status === 'frozen' ? 'frozen' : 'unfrozen'}.`);
  }
  card.status = status;
  await em.flush();
  recordIssuerSync(em, card);
  await emit(em, { organizationId: tenant.organizationId, environment: card.environment, type: status === 'frozen' ? 'card.frozen' : 'card.unfrozen', data: presentCard(card), destinations: cardDestinations(card) });
  return card;
}

/** The /api page_info of a keyset page. */
export const pageInfo = (page: Page<unknown>, limit: number) => ({ next_cursor: page.nextCursor, has_more: page.hasMore, limit });

const escapeLike = (value: string) => value.replace(/[\\%_]/g, (character) => `\\${character}`);

export function cardListFilter(tenant: CardTenant, query: { card_type?: string; status?: string; search?: string }): FilterQuery<Card> {
  const where: Record<string, unknown> = { ...tenantFilter(tenant) };
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
