import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import type { TestApp } from './app';
import type { StripeMock } from './stripe-mock';

/**
 * Stripe Issuing's events as Stripe sends them, built from stripe-mock's fixtures (Stripe's own
 * examples of each object, from its OpenAPI document) with only the fields a case is about set, and
 * typed by the stripe package: no shape of our own making reaches the endpoints.
 */

/** Our card as Stripe has it: its Stripe id and the metadata we gave it. */
export interface IssuedCard {
  issuerCardId: string;
  cardId: string;
  organizationId: string;
}

/** The SDK's test helper signs as Stripe does; the key is never used. */
const signer = new Stripe('sk_test_signer');

export const AUTHORIZATIONS_PATH = '/api/issuing/stripe/authorizations';
export const EVENTS_PATH = '/api/issuing/stripe/events';

export const stripeId = (prefix: string) => `${prefix}_${randomUUID().replace(/-/g, '')}`;

/** One decided request of an authorization's `request_history`, as the Stripe type documents it. */
function decidedRequest(amount: number, approved: boolean): Stripe.Issuing.Authorization.RequestHistory {
  const created = Math.floor(Date.now() / 1000);
  return {
    amount,
    amount_details: { atm_fee: null, cashback_amount: null },
    approved,
    authorization_code: approved ? 'S498162' : null,
    created,
    currency: 'usd',
    merchant_amount: amount,
    merchant_currency: 'usd',
    network_risk_score: null,
    reason: approved ? 'webhook_approved' : 'webhook_declined',
    reason_message: null,
    requested_at: created,
  };
}

export interface AuthorizationState {
  status: 'pending' | 'closed' | 'reversed';
  /** What Stripe holds for it now. */
  amount: number;
  /** The request awaiting a decision (its additional amount), or none. */
  pendingAmount?: number;
  /** The requests decided so far, oldest first (their amounts). */
  decided?: number[];
  /** Amounts of the captures it lists. */
  captures?: number[];
  approved?: boolean;
}

/** stripe-mock's authorization, made ours: our card, the amounts and the history of the case. */
export async function authorizationObject(mock: StripeMock, card: IssuedCard, id: string, state: AuthorizationState): Promise<Stripe.Issuing.Authorization> {
  const fixture = await mock.fixture<Stripe.Issuing.Authorization>(`/v1/issuing/authorizations/${id}`);
  const captures = await Promise.all((state.captures ?? []).map((amount) => transactionObject(mock, card, stripeId('ipi'), 'capture', amount, id)));
  return {
    ...fixture,
    id,
    amount: state.amount,
    merchant_amount: state.amount,
    approved: state.approved ?? true,
    status: state.status,
    card: { ...fixture.card, id: card.issuerCardId, metadata: { card_id: card.cardId, organization_id: card.organizationId } },
    merchant_data: { ...fixture.merchant_data, name: 'Corner Coffee' },
    pending_request:
      state.pendingAmount === undefined ? null : { ...fixture.pending_request!, amount: state.pendingAmount, merchant_amount: state.pendingAmount, currency: 'usd', merchant_currency: 'usd' },
    request_history: (state.decided ?? []).map((amount) => decidedRequest(amount, true)),
    transactions: captures,
  };
}

/** stripe-mock's issuing transaction, made ours: Stripe names the card by id and signs a capture negative, a refund positive. */
export async function transactionObject(
  mock: StripeMock,
  card: Pick<IssuedCard, 'issuerCardId'>,
  id: string,
  type: 'capture' | 'refund',
  amount: number,
  authorization: string | null,
): Promise<Stripe.Issuing.Transaction> {
  const fixture = await mock.fixture<Stripe.Issuing.Transaction>(`/v1/issuing/transactions/${id}`);
  const signed = type === 'capture' ? -amount : amount;
  return {
    ...fixture,
    id,
    type,
    amount: signed,
    merchant_amount: signed,
    currency: 'usd',
    authorization,
    card: card.issuerCardId,
    merchant_data: { ...fixture.merchant_data, name: 'Corner Coffee' },
  };
}

/** stripe-mock's event around `object`: a fresh id, the type, and the object's own mode. */
export async function eventOf(mock: StripeMock, type: string, object: { livemode: boolean }): Promise<string> {
  const id = stripeId('evt');
  const fixture = await mock.fixture<Stripe.Event>(`/v1/events/${id}`);
  const event = { ...fixture, id, type, livemode: object.livemode, api_version: Stripe.API_VERSION, created: Math.floor(Date.now() / 1000), data: { object } };
  return JSON.stringify(event);
}

/** `payload` posted to one of the Stripe endpoints as Stripe signs it (`Stripe-Signature` with the endpoint's secret). */
export function postSigned(app: TestApp, path: string, payload: string, secret: string) {
  return app.request('POST', path, {
    rawBody: payload,
    headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signer.webhooks.generateTestHeaderString({ payload, secret }) },
  });
}
