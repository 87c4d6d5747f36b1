import type { RouteRegistry } from '../http/route';
import { ErrorEnvelope } from '../shared/schemas';
import { CARD_TAG } from './schemas';
import { AuthorizationDecision, AuthorizationRequestEvent, decideStripeAuthorization, EventReceived, IssuingEvent, receiveStripeIssuingEvent, STRIPE_RESPONSE_VERSION } from './stripe-authorizations';

/**
 * What both of Stripe's endpoints are: public (Stripe signs them), answered whatever Temporal does
 * (the deliveries they record are started after, detached), 503 without a configured issuer.
 */
const STRIPE_ENDPOINT = {
  tag: CARD_TAG,
  scope: 'public' as const,
  detachDeliveries: true,
  otherResponses: [{ status: 503, description: 'No live card issuer is configured (card_issuer_unavailable)', schema: ErrorEnvelope }],
};

/** Stripe Issuing's two endpoints, each with its own signing secret (docs/cards.md). */
export function registerStripeIssuingRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/api/issuing/stripe/authorizations',
    operationId: 'decideStripeIssuingAuthorization',
    summary: "Stripe Issuing's real-time authorization endpoint (signed by Stripe with its own secret; no API key)",
    description:
      "Stripe Issuing's real-time authorization webhook (Issuing settings), signed with that endpoint's secret (`Stripe-Signature`, STRIPE_ISSUING_AUTHORIZATION_SECRET). An `issuing_authorization.request` event is answered with the decision from the live card's balance, status and spend limits, within Stripe's 2 seconds: each request is a new hold (an incremental authorization is judged on its increase), a repeated request answers the recorded decision, and a request for no live card of this platform, of the other Stripe mode, or not decided within STRIPE_ISSUING_DECISION_TIMEOUT_MS (the wait for a database connection included) is declined, recording nothing. Any other event type is 400 `unexpected_event_type`.",
    ...STRIPE_ENDPOINT,
    // The decision's own transaction, whose wait for a pooled connection counts against its deadline.
    ownTransactions: true,
    rawJsonBody: { documentedAs: AuthorizationRequestEvent },
    response: { status: 200, description: 'The decision, as Stripe reads it (with Stripe-Version)', schema: AuthorizationDecision },
    handler: async ({ rawBody, ctx, deps, em }) => ({
      body: await decideStripeAuthorization(em, deps, rawBody!, ctx.get('stripe-signature')),
      headers: { 'Stripe-Version': STRIPE_RESPONSE_VERSION },
    }),
  });

  routes.add({
    method: 'post',
    path: '/api/issuing/stripe/events',
    operationId: 'receiveStripeIssuingEvent',
    summary: "Stripe Issuing's event endpoint: what follows an authorization (signed by Stripe with its own secret; no API key)",
    description:
      "Stripe's event destination for Issuing, signed with that endpoint's secret (`Stripe-Signature`, STRIPE_ISSUING_WEBHOOK_SECRET). `issuing_authorization.created` / `.updated` (reversed, expired or closed without capture, amount lowered) give the released part back to the card's balance; `issuing_transaction.created` settles a capture against its authorization (an over-capture debited, the rest of an under-capture released) and credits a refund: each once per Stripe object, as a card transaction (`reversal`, `capture_adjustment`, `refund`). These and any other event are acknowledged `{\"received\": true}`; an event for no live card of this platform changes nothing; an event of the other Stripe mode (`livemode`) is 400 `livemode_mismatch`.",
    ...STRIPE_ENDPOINT,
    rawJsonBody: { documentedAs: IssuingEvent },
    response: { status: 200, description: 'The acknowledgement', schema: EventReceived },
    handler: async ({ rawBody, ctx, deps, em }) => ({ body: await receiveStripeIssuingEvent(em, deps, rawBody!, ctx.get('stripe-signature')) }),
  });
}
