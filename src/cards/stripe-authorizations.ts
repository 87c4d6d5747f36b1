import type { EntityManager } from '@mikro-orm/postgresql';
import Stripe from 'stripe';
import type { Config } from '../config';
import { DomainError, errors } from '../shared/errors';
import { MinorUnitNumber, z } from '../shared/schemas';
import { authorizeIssuerRequest } from './authorization';
import { stripeIssuingFor } from './providers/stripe-issuer';

/** The part of an `issuing_authorization.request` event we decide on (the event is Stripe's, signed). */
export const AuthorizationRequestEvent = z
  .object({
    id: z.string(),
    type: z.string(),
    data: z.object({
      object: z.object({
        id: z.string().min(1),
        card: z.object({ id: z.string().min(1), metadata: z.record(z.string(), z.string()) }),
        pending_request: z.object({ amount: MinorUnitNumber, currency: z.string() }).nullable(),
        merchant_data: z.object({ name: z.string().nullable().optional() }).optional(),
      }),
    }),
  })
  .openapi('StripeIssuingAuthorizationRequest', {
    description: 'A Stripe event of type `issuing_authorization.request` (https://docs.stripe.com/api/issuing/authorizations/object), as Stripe sends and signs it.',
  });

export const AuthorizationDecision = z.object({ approved: z.boolean() }).openapi('StripeIssuingAuthorizationDecision');

const issuerUnavailable = () =>
  new DomainError({
    kind: 'unavailable',
    code: 'card_issuer_unavailable',
    message: 'No live card issuer is configured (STRIPE_ISSUING_SECRET_KEY and STRIPE_ISSUING_WEBHOOK_SECRET).',
  });

/**
 * Stripe Issuing's real-time authorization webhook (route in routes.ts): the event's signature is
 * checked on the exact bytes received (400 `invalid_signature`, nothing changed), and the decision,
 * by our balance and spend limits in the caller's one short transaction (well within Stripe's 2
 * seconds), is what Stripe's synchronous response carries: `{ "approved": true | false }`
 * (https://docs.stripe.com/issuing/controls/real-time-authorizations). A request for no live card of
 * ours is declined, recording nothing.
 */
export async function decideStripeAuthorization(em: EntityManager, config: Config, rawBody: string, signature: string): Promise<{ approved: boolean }> {
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
  if (event.type !== 'issuing_authorization.request') {
    throw errors.invalid('unsupported_event_type', `This endpoint decides issuing_authorization.request events only, not ${event.type}.`, { param: 'type' });
  }
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

/** The API version Stripe reads our decision in (its response's required `Stripe-Version`): the SDK's. */
export const STRIPE_RESPONSE_VERSION = Stripe.API_VERSION;
