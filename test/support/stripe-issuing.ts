import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { applyBalanceEntry } from '../../src/balances/service';
import { issuerRequestReference } from '../../src/cards/authorization';
import { Card, CardTransaction } from '../../src/cards/entities';
import { stripeIssuingReconciliationWorkflowType, type StripeIssuingReconciliationInput } from '../../src/cards/flows/issuer-reconciliation';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from './app';
import { validCustomer } from './customer';
import { localTemporal, testOrm } from './environment';
import { eventually } from './eventually';
import { AUTHORIZATIONS_PATH, authorizationObject, EVENTS_PATH, eventOf, postSigned, type AuthorizationState } from './stripe-events';
import { startStripeMockIfInstalled, type StripeMock } from './stripe-mock';
import { createTestWorker } from './worker';

/** Live cards through Stripe Issuing for a test file: stripe-mock (when installed), the app and a worker on a task queue of their own, an organization with a live key. */
export interface StripeIssuingHarness {
  stripeMock: StripeMock | null;
  app: TestApp;
  /** The app's configuration (stripe-mock's included), to start another app like it. */
  config: Record<string, string>;
  taskQueue: string;
  org: TestOrganization;
  /** The organization's live key, scope `*`. */
  live: string;
  stop: () => Promise<void>;
}

/** Starts the harness; the organization's live USD balance holds 500 dollars to fund cards with. */
export async function startStripeIssuingHarness(name: string, extraConfig: Record<string, string> = {}): Promise<StripeIssuingHarness> {
  const stripeMock = await startStripeMockIfInstalled();
  const taskQueue = `stripe-issuing-${randomUUID()}`;
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, ...extraConfig, ...stripeMock?.config };
  const app = await startTestApp({ config });
  const { worker } = await createTestWorker(await localTemporal(), taskQueue, stripeMock?.config ?? {});
  const running = worker.run();
  const org = await createTestOrganization(name);
  const live = (await org.key(['*'], 'live')).secret;
  await (await testOrm()).em.fork().transactional((tx) =>
    applyBalanceEntry(tx, { organizationId: org.organizationId, environment: 'live', currency: 'usd', kind: 'credit', amount: 50_000n, reference: { type: 'sandbox_credit', id: randomUUID() } }),
  );
  return {
    stripeMock,
    app,
    config,
    taskQueue,
    org,
    live,
    stop: async () => {
      worker.shutdown();
      await running;
      await app.close();
      await stripeMock?.stop();
    },
  };
}

/** A customer's acceptance of Celtic's terms, as the tests' live cards carry it. */
export const TERMS_ACCEPTANCE = { accepted_at: '2026-11-02T10:15:00Z', ip: '198.51.100.7', user_agent: 'Mozilla/5.0 (card-holder)' };

/**
 * What the Stripe Issuing tests do through a harness: live cards, Stripe's requests and events (built from
 * stripe-mock's fixtures), reconciliation passes. Each reads `current()` when called: the harness starts in `before`.
 */
export function stripeIssuingCases(current: () => StripeIssuingHarness) {
  const mock = () => current().stripeMock!;
  const balance = async (cardId: string) => (await current().app.request('GET', `/api/cards/${cardId}`, { key: current().live })).body.data.card.balance_amount as string;
  const issued = (card: Card) => ({ issuerCardId: card.issuerCardId!, cardId: card.id, organizationId: current().org.organizationId });
  const decide = (payload: string, secret = mock().authorizationSecret, target = current().app) => postSigned(target, AUTHORIZATIONS_PATH, payload, secret);
  const notify = (payload: string, secret = mock().eventSecret) => postSigned(current().app, EVENTS_PATH, payload, secret);
  return {
    balance,
    decide,
    notify,
    /** A live card at Stripe (stripe-mock), active and funded with `amount` cents; its customer has accepted Celtic's terms unless `customer` says otherwise. */
    async liveCard(amount: number, cardLimits: Record<string, string> = {}, customer: Record<string, unknown> = { ...validCustomer(), terms_acceptance: TERMS_ACCEPTANCE }) {
      const body = { amount, card_type: 'virtual', currency: 'USD', name: 'Grace Hopper', customer, card_limits: cardLimits };
      const created = await current().app.request('POST', '/api/cards', { key: current().live, body });
      assert.equal(created.status, 201, created.text);
      const id = created.body.data.card.id as string;
      // Provisioned (minted, synced) and its initial funding settled: nothing of its own still reaches Stripe.
      await (await localTemporal()).client.workflow.getHandle(`card-provisioning-${id}`).result();
      await eventually(async () => ((await balance(id)) === String(amount) ? true : undefined), 'the live card to be funded');
      return (await testOrm()).em.fork().findOneOrFail(Card, { id });
    },
    /** A request on the authorization: `amount` more to hold on top of `held`, after the requests `decided`. */
    request: async (card: Card, id: string, amount: number, held = 0, decided: number[] = []) =>
      eventOf(mock(), 'issuing_authorization.request', await authorizationObject(mock(), issued(card), id, { status: 'pending', amount: held, pendingAmount: amount, decided })),
    authorizationEvent: async (card: Card, id: string, state: AuthorizationState, type = 'issuing_authorization.updated') =>
      eventOf(mock(), type, await authorizationObject(mock(), issued(card), id, state)),
    issued,
    async decision(payload: string) {
      const response = await decide(payload);
      assert.equal(response.status, 200, response.text);
      return (response.body as { approved: boolean }).approved;
    },
    async acknowledged(payload: string) {
      const response = await notify(payload);
      assert.deepEqual([response.status, response.body], [200, { received: true }], response.text);
    },
    /** One pass of the Schedule's reconciliation, run by the harness's worker (on its stripe-mock). */
    reconcileIssuing: async (input: StripeIssuingReconciliationInput) =>
      (await localTemporal()).client.workflow.execute(stripeIssuingReconciliationWorkflowType, {
        workflowId: `test-issuing-reconciliation-${randomUUID()}`,
        args: [input],
        taskQueue: current().taskQueue,
      }),
    /** The card's transactions under the authorization, oldest first: type, status, amount, decline reason, reference. */
    async movements(card: Card, authorizationId: string) {
      const reference = issuerRequestReference(authorizationId, 0);
      const found = await (await testOrm()).em.fork().find(
        CardTransaction,
        { card: card.id, $or: [{ reference }, { reference: { $like: `${reference}:%` } }] },
        { orderBy: { createdAt: 'asc', id: 'asc' } },
      );
      return found.map((tx) => [tx.type, tx.status, tx.amount, tx.failureReason ?? null, tx.reference]);
    },
  };
}
