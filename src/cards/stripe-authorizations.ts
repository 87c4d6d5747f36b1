import type { EntityManager } from '@mikro-orm/postgresql';
import Stripe from 'stripe';
import type { Config } from '../config';
import { DomainError, errors } from '../shared/errors';
import { MinorUnitNumber, z } from '../shared/schemas';
import { authorizeIssuerRequest } from './authorization';
import { followIssuerAuthorization, followIssuerTransaction } from './issuer-settlement';
import { stripeIssuingFor } from './providers/stripe-issuer';

/** A Stripe event around the fields of its object we read (each event is Stripe's, signed). */
const stripeEvent = <T extends z.ZodRawShape>(object: T) =>
  z.object({ id: z.string(), type: z.string(), data: z.object({ object: z.object({ id: z.string().min(1), ...object }) }) });
/** Our card at Stripe: its id, and the metadata naming our organization. */
const StripeCard = z.object({ id: z.string().min(1), metadata: z.record(z.string(), z.string()) });
const MerchantData = z.object({ name: z.string().nullable().optional() }).optional();

/** The part of an `issuing_authorization.request` event we decide on. */
export const AuthorizationRequestEvent = stripeEvent({
  card: StripeCard,
  pending_request: z.object({ amount: MinorUnitNumber, currency: z.string() }).nullable(),
  merchant_data: MerchantData,
}).openapi('StripeIssuingAuthorizationRequest', {
    description: 'A Stripe event of type `issuing_authorization.request` (https://docs.stripe.com/api/issuing/authorizations/object), as Stripe sends and signs it.',
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

/** The events this endpoint takes, as documented (each is read by its own schema). */
export const IssuingEvent = z.union([AuthorizationRequestEvent, AuthorizationUpdateEvent, TransactionCreatedEvent]).openapi('StripeIssuingEvent');

export const AuthorizationDecision = z.object({ approved: z.boolean() }).openapi('StripeIssuingAuthorizationDecision');
/** The acknowledgement of any other event: Stripe only needs the 2xx. */
export const EventReceived = z.object({ received: z.literal(true) }).openapi('StripeIssuingEventReceived');
export const IssuingEventAnswer = z.union([AuthorizationDecision, EventReceived]).openapi('StripeIssuingEventAnswer');

const issuerUnavailable = () =>
  new DomainError({
    kind: 'unavailable',
    code: 'card_issuer_unavailable',
    message: 'No live card issuer is configured (STRIPE_ISSUING_SECRET_KEY and STRIPE_ISSUING_WEBHOOK_SECRET).',
  });

/**
 * Stripe Issuing's webhook (route in routes.ts): the event's signature is checked on the exact bytes
 * received (400 `invalid_signature`, nothing changed). An `issuing_authorization.request` is decided
 * by our balance and spend limits in the caller's one short transaction (well within Stripe's 2
 * seconds), and Stripe's synchronous response carries the decision: `{ "approved": true | false }`
 * (https://docs.stripe.com/issuing/controls/real-time-authorizations); a request for no live card of
 * ours is declined, recording nothing. What follows the decision (authorizations reversed, expired or
 * captured, refunds) moves the card's balance (issuer-settlement.ts) and is acknowledged
 * `{ "received": true }`, as is any other event, which changes nothing.
 */
export async function receiveStripeIssuingEvent(em: EntityManager, config: Config, rawBody: string, signature: string): Promise<{ approved: boolean } | { received: true }> {
  // An unsigned request is bad input (400) whether or not an issuer is configured; only a signed one needs the issuer to answer.
  if (!signature) throw errors.invalid('invalid_signature', 'The Stripe-Signature header is missing.', { param: 'Stripe-Signature' });
  const stripe = stripeIssuingFor(config);
  if (!stripe) throw issuerUnavailable();
  let event: Stripe.Event;
  try {
    event = stripe.client.webhooks.constructEvent(rawBody, signature, stripe.webhookSecret);
  } catch (error) {
    if (error instanceof Stripe.errors.StripeSignatureVerificationError) {
      throw errors.invalid('invalid_signature', 'The Stripe-Signature header does not verify this body with the endpoint secret.', { param: 'Stripe-Signature' });
    }
    // Signed, but not JSON.
    throw errors.invalid('invalid_json', 'The body is not valid JSON.');
  }
  switch (event.type) {
    case 'issuing_authorization.request':
      return decideAuthorization(em, event);
    case 'issuing_authorization.created':
    case 'issuing_authorization.updated':
      await followAuthorization(em, event);
      return { received: true };
    case 'issuing_transaction.created':
      await followTransaction(em, event);
      return { received: true };
    default:
      return { received: true };
  }
}

async function decideAuthorization(em: EntityManager, event: Stripe.Event): Promise<{ approved: boolean }> {
  const parsed = AuthorizationRequestEvent.safeParse(event);
  if (!parsed.success) throw errors.validation('The event is not an issuing authorization request.', 'data.object');
  const authorization = parsed.data.data.object;
  const request = authorization.pending_request;
  const organizationId = authorization.card.metadata.organization_id;
  // Our cards are USD cards; anything else is no purchase we can decide on.
  const decision =
    request && request.currency === 'usd' && organizationId
      ? await authorizeIssuerRequest(em, {
          issuerCardId: authorization.card.id,
          organizationId,
          authorizationId: authorization.id,
          amount: BigInt(request.amount),
          merchantName: authorization.merchant_data?.name ?? null,
          at: new Date(),
        })
      : null;
  return { approved: decision?.approved ?? false };
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
