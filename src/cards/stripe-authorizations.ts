import type { EntityManager } from '@mikro-orm/postgresql';
import Stripe from 'stripe';
import { isTimedOut } from '../db/transient-errors';
import type { Registry } from 'prom-client';
import type { Config } from '../config';
import type { Logger } from '../logger';
import type { WorkflowStarter } from '../temporal/starter';
import { DomainError, errors } from '../shared/errors';
import { MinorUnitNumber, z } from '../shared/schemas';
import { authorizeIssuerRequest } from './authorization';
import { followIssuerAuthorization, followIssuerTransaction } from './issuer-settlement';
import { stripeIssuingFor, type StripeIssuing } from './providers/stripe-issuer';
import { stripeIssuingMetrics } from './stripe-metrics';

/** A Stripe event around the fields of its object we read (each event is Stripe's, signed), and its mode. */
const stripeEvent = <T extends z.ZodRawShape>(object: T) =>
  z.object({ id: z.string(), type: z.string(), livemode: z.boolean(), data: z.object({ object: z.object({ id: z.string().min(1), ...object }) }) });
/** Our card at Stripe: its id, and the metadata naming our organization. */
const StripeCard = z.object({ id: z.string().min(1), metadata: z.record(z.string(), z.string()) });
const MerchantData = z.object({ name: z.string().nullable().optional() }).optional();
/** The requests Stripe decided on the authorization so far (approved or declined), oldest first. */
const RequestHistory = z.array(z.object({ approved: z.boolean() }));

/** The part of an `issuing_authorization.request` event we decide on. */
export const AuthorizationRequestEvent = stripeEvent({
  card: StripeCard,
  // What Stripe already holds for it: 0 for a new authorization, the approved amount for an incremental request.
  amount: MinorUnitNumber,
  // The additional amount to hold: the purchase, or an increment's increase.
  pending_request: z.object({ amount: MinorUnitNumber, currency: z.string() }).nullable(),
  request_history: RequestHistory,
  merchant_data: MerchantData,
}).openapi('StripeIssuingAuthorizationRequest', {
    description:
      'A Stripe event of type `issuing_authorization.request` (https://docs.stripe.com/api/issuing/authorizations/object), as Stripe sends and signs it: `pending_request.amount` is the additional amount to hold, `request_history` the requests decided before it (an incremental authorization has some).',
  });

/** A signed cent amount as Stripe writes it (a capture's transaction amount is negative). */
const SignedCents = z.number().int().min(-Number.MAX_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER);

/** The part of an `issuing_authorization.created` / `.updated` event we follow: its state after our decision. */
export const AuthorizationUpdateEvent = stripeEvent({
  status: z.enum(['pending', 'closed', 'reversed']),
  amount: MinorUnitNumber,
  currency: z.string(),
  card: StripeCard,
  transactions: z.array(z.object({ type: z.string() })).optional(),
  request_history: RequestHistory.optional(),
}).openapi('StripeIssuingAuthorizationUpdate', {
    description: 'A Stripe event of type `issuing_authorization.created` or `issuing_authorization.updated`: the authorization as it now is (https://docs.stripe.com/api/issuing/authorizations/object).',
  });

/** The part of an `issuing_transaction.created` event we follow: a capture or a refund on one of our cards. */
export const TransactionCreatedEvent = stripeEvent({
  type: z.enum(['capture', 'refund']),
  amount: SignedCents,
  currency: z.string(),
  authorization: z.union([z.string().min(1), z.object({ id: z.string().min(1) })]).nullable(),
  card: z.union([z.string().min(1), StripeCard]),
  merchant_data: MerchantData,
}).openapi('StripeIssuingTransactionCreated', {
    description: 'A Stripe event of type `issuing_transaction.created` (https://docs.stripe.com/api/issuing/transactions/object): `amount` is negative for a capture, positive for a refund.',
  });

/** The events the event endpoint acts on, as documented (each is read by its own schema). */
export const IssuingEvent = z.union([AuthorizationUpdateEvent, TransactionCreatedEvent]).openapi('StripeIssuingEvent');

export const AuthorizationDecision = z.object({ approved: z.boolean() }).openapi('StripeIssuingAuthorizationDecision');
/** The acknowledgement of any other event: Stripe only needs the 2xx. */
export const EventReceived = z.object({ received: z.literal(true) }).openapi('StripeIssuingEventReceived');

const issuerUnavailable = () =>
  new DomainError({
    kind: 'unavailable',
    code: 'card_issuer_unavailable',
    message: 'No live card issuer is configured (STRIPE_ISSUING_SECRET_KEY, STRIPE_ISSUING_AUTHORIZATION_SECRET and STRIPE_ISSUING_WEBHOOK_SECRET).',
  });

/** What the Stripe endpoints need of the process: its configuration, log, metrics registry and workflow starter. */
export interface StripeEndpointDeps {
  config: Config;
  log: Logger;
  metrics: Registry;
  starter: WorkflowStarter;
}

/** The event in `rawBody` once its signature checks out with `secret` on the exact bytes received (else 400 `invalid_signature`, nothing changed). */
function verifiedEvent(stripe: StripeIssuing, secret: string, rawBody: string, signature: string): Stripe.Event {
  try {
    return stripe.client.webhooks.constructEvent(rawBody, signature, secret);
  } catch (error) {
    if (error instanceof Stripe.errors.StripeSignatureVerificationError) {
      throw errors.invalid('invalid_signature', 'The Stripe-Signature header does not verify this body with the endpoint secret.', { param: 'Stripe-Signature' });
    }
    // Signed, but not JSON.
    throw errors.invalid('invalid_json', 'The body is not valid JSON.');
  }
}

/** The configured issuer, after the checks a request to either endpoint passes first. */
function issuerFor(config: StripeEndpointDeps['config'], signature: string): StripeIssuing {
  // An unsigned request is bad input (400) whether or not an issuer is configured; only a signed one needs the issuer to answer.
  if (!signature) throw errors.invalid('invalid_signature', 'The Stripe-Signature header is missing.', { param: 'Stripe-Signature' });
  const stripe = stripeIssuingFor(config);
  if (!stripe) throw issuerUnavailable();
  return stripe;
}

/**
 * Stripe Issuing's real-time authorization endpoint (route in routes.ts), signed with its own secret
 * (STRIPE_ISSUING_AUTHORIZATION_SECRET): an `issuing_authorization.request` is decided by our balance
 * and spend limits in one short transaction of its own (`em` is outside any), and Stripe's synchronous response carries
 * the decision: `{ "approved": true | false }` (https://docs.stripe.com/issuing/controls/real-time-authorizations).
 * Declined, recording nothing: a request for no live card of ours, of the other mode than ours
 * (`livemode`), or one the pool, the card's lock or the database did not let us decide within
 * STRIPE_ISSUING_DECISION_TIMEOUT_MS (counted). Any other event type is 400 `unexpected_event_type`:
 * the event endpoint takes those.
 */
export async function decideStripeAuthorization(em: EntityManager, deps: StripeEndpointDeps, rawBody: string, signature: string): Promise<{ approved: boolean }> {
  const stripe = issuerFor(deps.config, signature);
  const event = verifiedEvent(stripe, stripe.authorizationSecret, rawBody, signature);
  if (event.type !== 'issuing_authorization.request') {
    throw errors.invalid('unexpected_event_type', `This endpoint decides issuing_authorization.request only; send ${event.type} to /api/issuing/stripe/events.`);
  }
  const parsed = AuthorizationRequestEvent.safeParse(event);
  if (!parsed.success) throw errors.validation('The event is not an issuing authorization request.', 'data.object');
  if (parsed.data.livemode !== stripe.livemode) {
    deps.log.warn({ event_id: event.id, livemode: parsed.data.livemode }, 'Stripe authorization request of the other mode than STRIPE_ISSUING_MODE declined');
    return { approved: false };
  }
  const authorization = parsed.data.data.object;
  const request = authorization.pending_request;
  const organizationId = authorization.card.metadata.organization_id;
  // Our cards are USD cards; anything else is no purchase we can decide on.
  if (!request || request.currency !== 'usd' || !organizationId) return { approved: false };
  const decide = (decisionEm: EntityManager) =>
    authorizeIssuerRequest(decisionEm, {
      issuerCardId: authorization.card.id,
      organizationId,
      authorizationId: authorization.id,
      requestIndex: authorization.request_history.length,
      heldAmount: BigInt(authorization.amount),
      amount: BigInt(request.amount),
      merchantName: authorization.merchant_data?.name ?? null,
      at: new Date(),
    });
  const decision = await withinDecisionBudget(em, deps, decide, { event_id: event.id, authorization_id: authorization.id });
  return { approved: decision?.approved ?? false };
}

/** The decision's connection came from the pool past its deadline: it decides nothing (its decline was answered). */
class DecisionTooLate extends Error {}
const TOO_LATE = Symbol('too late');

/**
 * Runs the decision in a transaction of its own, all of it within STRIPE_ISSUING_DECISION_TIMEOUT_MS:
 * the wait for a pooled connection, then the card's lock and each statement within what is left.
 * Past it the purchase is declined, nothing recorded, counted in stripe_issuing_authorization_timeouts_total:
 * PostgreSQL gives up a lock or statement (the transaction rolls back), and a connection the pool hands
 * over too late is given back unused. The deliveries the decision records start after its commit,
 * detached (Stripe is answered whatever Temporal does).
 */
async function withinDecisionBudget<T>(em: EntityManager, deps: StripeEndpointDeps, decide: (em: EntityManager) => Promise<T>, context: Record<string, string>): Promise<T | null> {
  const budgetMs = deps.config.STRIPE_ISSUING_DECISION_TIMEOUT_MS;
  const deadline = performance.now() + budgetMs;
  // Once connected the decision runs to its end (its statements bounded by PostgreSQL), so a commit is never answered as a decline.
  let connected = false;
  let tooLate = false;
  const decided = deps.starter.transaction(
    em,
    async (tx) => {
      const left = Math.floor(deadline - performance.now());
      if (tooLate || left <= 0) throw new DecisionTooLate();
      connected = true;
      await tx.execute(`select set_config('lock_timeout', ?, true), set_config('statement_timeout', ?, true)`, [`${left}ms`, `${left}ms`]);
      return decide(tx);
    },
    { detachDeliveries: true },
  );
  let timer: NodeJS.Timeout | undefined;
  const waitedTooLong = new Promise<typeof TOO_LATE>((resolve) => {
    timer = setTimeout(() => {
      if (connected) return;
      tooLate = true;
      resolve(TOO_LATE);
    }, budgetMs);
  });
  try {
    // Past the deadline without a connection, the decision rolls back once it has one (DecisionTooLate), its rejection
    // observed by the race already settled.
    const outcome = await Promise.race([decided, waitedTooLong]);
    if (outcome !== TOO_LATE) return outcome;
  } catch (error) {
    if (!isTimedOut(error) && !(error instanceof DecisionTooLate)) throw error;
  } finally {
    clearTimeout(timer);
  }
  stripeIssuingMetrics(deps.metrics).decisionTimeouts.inc();
  deps.log.warn(context, `Stripe authorization declined: not decided within ${budgetMs}ms`);
  return null;
}

/**
 * Stripe Issuing's event endpoint (route in routes.ts), signed with its own secret
 * (STRIPE_ISSUING_WEBHOOK_SECRET): what follows the decision (authorizations reversed, expired or
 * captured, refunds) moves the card's balance (issuer-settlement.ts) and is acknowledged
 * `{ "received": true }`, as is any other event, which changes nothing (an
 * `issuing_authorization.request` among them: the authorization endpoint decides those). An event
 * of the other mode than ours (`livemode`) is 400 `livemode_mismatch`, nothing changed.
 */
export async function receiveStripeIssuingEvent(em: EntityManager, deps: StripeEndpointDeps, rawBody: string, signature: string): Promise<{ received: true }> {
  const stripe = issuerFor(deps.config, signature);
  const event = verifiedEvent(stripe, stripe.eventSecret, rawBody, signature);
  if (event.livemode !== stripe.livemode) {
    throw errors.invalid('livemode_mismatch', `The event is a ${event.livemode ? 'live' : 'test'}-mode event; this service runs Stripe Issuing in ${stripe.livemode ? 'live' : 'test'} mode.`);
  }
  switch (event.type) {
    case 'issuing_authorization.created':
    case 'issuing_authorization.updated':
      await followAuthorization(em, event);
      break;
    case 'issuing_transaction.created':
      await followTransaction(em, event);
      break;
  }
  return { received: true };
}

async function followAuthorization(em: EntityManager, event: Stripe.Event): Promise<void> {
  const parsed = AuthorizationUpdateEvent.safeParse(event);
  if (!parsed.success) throw errors.validation('The event is not an issuing authorization.', 'data.object');
  const authorization = parsed.data.data.object;
  const organizationId = authorization.card.metadata.organization_id;
  // Our cards are USD cards: an authorization in another currency was never ours to charge.
  if (authorization.currency !== 'usd' || !organizationId) return;
  await followIssuerAuthorization(em, {
    issuerCardId: authorization.card.id,
    organizationId,
    authorizationId: authorization.id,
    status: authorization.status,
    heldAmount: BigInt(authorization.amount),
    captured: (authorization.transactions ?? []).some((transaction) => transaction.type === 'capture'),
    requestsDecided: authorization.request_history?.length ?? null,
  });
}

async function followTransaction(em: EntityManager, event: Stripe.Event): Promise<void> {
  const parsed = TransactionCreatedEvent.safeParse(event);
  if (!parsed.success) throw errors.validation('The event is not an issuing transaction.', 'data.object');
  const transaction = parsed.data.data.object;
  if (transaction.currency !== 'usd') return;
  const { card, authorization } = transaction;
  const amount = BigInt(transaction.amount);
  await followIssuerTransaction(em, {
    issuerCardId: typeof card === 'string' ? card : card.id,
    organizationId: typeof card === 'string' ? null : (card.metadata.organization_id ?? ''),
    transactionId: transaction.id,
    type: transaction.type,
    // Stripe signs the amount as its balance moves: a capture negative, a refund positive.
    amount: amount < 0n ? -amount : amount,
    authorizationId: authorization === null ? null : typeof authorization === 'string' ? authorization : authorization.id,
    merchantName: transaction.merchant_data?.name ?? null,
  });
}

/** The API version Stripe reads our decision in (its response's required `Stripe-Version`): the SDK's. */
export const STRIPE_RESPONSE_VERSION = Stripe.API_VERSION;
