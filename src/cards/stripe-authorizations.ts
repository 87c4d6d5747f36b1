import Stripe from 'stripe';
import type { RouteRegistry } from '../http/route';
import { DomainError, errors } from '../shared/errors';
import { ErrorEnvelope, z } from '../shared/schemas';
import { authorizeIssuerRequest } from './authorization';
import { stripeIssuingFor } from './providers/stripe-issuer';

/** The part of an `issuing_authorization.request` event we decide on (the event is Stripe's, signed). */
const AuthorizationRequestEvent = z
  .object({
    id: z.string(),
    type: z.string(),
    data: z.object({
      object: z.object({
        id: z.string().min(1),
        card: z.object({ id: z.string().min(1), metadata: z.record(z.string(), z.string()) }),
        pending_request: z.object({ amount: z.number().int().min(0), currency: z.string() }).nullable(),
        merchant_data: z.object({ name: z.string().nullable().optional() }).optional(),
      }),
    }),
  })
  .openapi('StripeIssuingAuthorizationRequest', {
    description: 'A Stripe event of type `issuing_authorization.request` (https://docs.stripe.com/api/issuing/authorizations/object), as Stripe sends and signs it.',
  });

const AuthorizationDecision = z.object({ approved: z.boolean() }).openapi('StripeIssuingAuthorizationDecision');

const issuerUnavailable = () =>
  new DomainError({
    kind: 'unavailable',
    code: 'card_issuer_unavailable',
    message: 'No live card issuer is configured (STRIPE_ISSUING_SECRET_KEY and STRIPE_ISSUING_WEBHOOK_SECRET).',
  });

/**
 * Stripe Issuing's real-time authorization webhook: the event's signature is checked on the exact
 * bytes received (400 `invalid_signature`, nothing changed), and the answer is Stripe's synchronous
 * decision body, `{ "approved": true | false }` with `Stripe-Version`
 * (https://docs.stripe.com/issuing/controls/real-time-authorizations), decided by our balance and
 * spend limits in one short transaction, well within Stripe's 2 seconds.
 */
export function registerStripeAuthorizationRoute(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/api/issuing/stripe/authorizations',
    operationId: 'decideStripeIssuingAuthorization',
    summary: "Stripe Issuing's real-time authorization webhook (signed by Stripe; no API key)",
    description:
      "Stripe Issuing's real-time authorization webhook: an `issuing_authorization.request` event signed with the endpoint's secret (`Stripe-Signature`), answered with the decision from the card's balance, status and spend limits. A repeated event answers the recorded decision. A request for no live card of this platform is declined, recording nothing.",
    tag: 'Cards',
    scope: 'public',
    rawJsonBody: { documentedAs: AuthorizationRequestEvent },
    response: { status: 200, description: 'The decision, as Stripe reads it', schema: AuthorizationDecision },
    otherResponses: [{ status: 503, description: 'No live card issuer is configured (card_issuer_unavailable)', schema: ErrorEnvelope }],
    handler: async ({ rawBody, ctx, deps, em }) => {
      const stripe = stripeIssuingFor(deps.config);
      if (!stripe) throw issuerUnavailable();
      const signature = ctx.get('stripe-signature');
      if (!signature) throw errors.invalid('invalid_signature', 'The Stripe-Signature header is missing.', { param: 'Stripe-Signature' });
      let event: Stripe.Event;
      try {
        event = stripe.client.webhooks.constructEvent(rawBody!, signature, stripe.webhookSecret);
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
      return { body: { approved: decision?.approved ?? false }, headers: { 'Stripe-Version': Stripe.API_VERSION } };
    },
  });
}
