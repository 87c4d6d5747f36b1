/**
 * A card's life: created with its customer and initial funding, activated or failed by provisioning,
 * frozen and unfrozen, and terminated after its cooling period.
 */
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { applyBalanceEntry } from '../balances/service';
import type { Config } from '../config';
import { newSigningSecrets } from '../events/secrets';
import { emit, validatedUrl } from '../events/service';
import { checkDestinationUrl } from '../events/url-policy';
import type { KeyProvider } from '../keys/provider';
import { Organization } from '../organizations/entities';
import type { Caller } from '../policies/service';
import { DomainError, errors } from '../shared/errors';
import { prefixedId } from '../shared/ids';
import type { z } from '../shared/schemas';
import { recordStart } from '../temporal/starter';
import { Card, CardTransaction, Customer, type SealedCardSecrets } from './entities';
import { cardProvisioningFlow } from './flows/provisioning';
import { CARD_COOLING_PERIOD_MS, cardTerminationFlow } from './flows/termination';
import type { MintedCard } from './issuer';
import { recordIssuerSync } from './issuer-sync';
import { initialFundingReference, presentCard, presentTermination } from './presenters';
import type { CreateCardBody, CustomerInput } from './schemas';
import { limitsFromDecimals } from './spend-limits';
import { lockingOnlyItsRow } from '../db/row-lock';
import { cardDestinations, findCard, invalidStateTransition, tenantFilter, type CardTenant } from './lookups';
import { fundingFee, judgeCardMove, reserveFunding, settleTransaction } from './balance-moves';
import { cardLines, postCardMovement } from './ledger';

/** The ledger reference of a termination: the card id makes its return idempotent. */
const cardTerminationReference = (cardId: string) => ({ type: 'card_termination', id: cardId });

/** When the 24-hour cooling period after creation ends. */
export const terminableAt = (card: Card) => new Date(card.createdAt.getTime() + CARD_COOLING_PERIOD_MS);

/**
 * The customer with the same identity document in this company and environment, else a new one.
 * A transaction-scoped advisory lock on the identity serializes concurrent creations, so two
 * requests for a new cardholder share one customer instead of one failing on the unique key.
 */
async function customerFor(em: EntityManager, tenant: CardTenant, input: CustomerInput): Promise<Customer> {
  const identity = ['card-customer', tenant.organizationId, tenant.environment, input.id_type, input.id_number, input.country].join('|');
  await em.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [identity], 'run');
  const existing = await em.findOne(Customer, { ...tenantFilter(tenant), idType: input.id_type, idNumber: input.id_number, country: input.country });
  const termsAcceptance = input.terms_acceptance ? { ...input.terms_acceptance, user_agent: input.terms_acceptance.user_agent ?? null } : null;
  // Its stored details are kept; an acceptance of the terms it lacked is added (a newer one replaces nothing already accepted).
  if (existing) return Object.assign(existing, { termsAcceptance: existing.termsAcceptance ?? termsAcceptance });
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
    termsAcceptance,
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
    message: 'No live card issuer is configured: live cards need Stripe Issuing (STRIPE_ISSUING_SECRET_KEY, STRIPE_ISSUING_AUTHORIZATION_SECRET and STRIPE_ISSUING_WEBHOOK_SECRET).',
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
  // A Celtic-backed program issues no card to a cardholder who has not accepted Celtic's Authorized User Terms.
  if (creator.environment === 'live' && options.config.STRIPE_ISSUING_CELTIC_TERMS && !customer.termsAcceptance) {
    throw errors.validation("This card program needs the customer's acceptance of its user terms (Celtic's Authorized User Terms).", 'customer.terms_acceptance');
  }
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
 * The termination workflow's step: returns `balance - held` to the company balance (one posting
 * from the card's available account to the company's) and marks the card terminated, once (a
 * terminated card is returned as it is). Re-checked under the card lock; what cannot be
 * terminated yet throws a plain (retried) error, never a refusal.
 */
export async function terminateCard(em: EntityManager, cardId: string, now: Date): Promise<Card> {
  const card = await em.findOneOrFail(Card, { id: cardId }, { ...lockingOnlyItsRow(em, Card), populate: ['customer'] });
  if (card.status === 'terminated') return card;
  if (now < terminableAt(card)) throw new Error(`card ${card.id} is in its cooling period until ${terminableAt(card).toISOString()}`);
  if ((await em.count(CardTransaction, { card, status: 'pending' })) > 0) throw new Error(`card ${card.id} has transactions still settling`);
  const remaining = BigInt(card.balance) - BigInt(card.held);
  const reference = cardTerminationReference(card.id);
  if (remaining > 0n) {
    await applyBalanceEntry(em, { organizationId: card.organization.id, environment: card.environment, currency: 'usd', kind: 'credit', amount: remaining, reference, against: cardLines(card.id, { available: -remaining }) });
  } else {
    // A card the issuer took below zero is not charged to the company: its debt stays with the issuer, who already paid it.
    await postCardMovement(em, card, { kind: 'termination', reference, change: { available: -remaining }, counterparty: 'card_issuer' });
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
