import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import Stripe from 'stripe';
import { issuerRequestReference } from '../../src/cards/authorization';
import { Card, CardTransaction, Customer } from '../../src/cards/entities';
import { Event } from '../../src/events/entities';
import { STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID, stripeIssuingReconciliationWorkflowType } from '../../src/cards/flows/issuer-reconciliation';
import { CardIssuerDrift } from '../../src/cards/issuer-drifts';
import { WorkflowStart } from '../../src/temporal/entities';
import { scheduleDefinitions } from '../../src/temporal/setup';
import { startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { validCustomer } from '../support/cards';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { AUTHORIZATIONS_PATH, authorizationObject, EVENTS_PATH, eventOf, postSigned, stripeId, transactionObject, type AuthorizationState } from '../support/stripe-events';
import { startStripeIssuingHarness, type StripeIssuingHarness } from '../support/stripe-issuing';
import { acceptedRequestTo, needStripeMock, type StripeMock } from '../support/stripe-mock';

/** The decision budget of this file's app: short, so a held card lock runs it out quickly. */
const DECISION_TIMEOUT_MS = 1_000;

/**
 * Stripe Issuing's real-time decision under what a real deployment meets: incremental authorizations,
 * a card lock held by someone else, a Temporal that does not answer, the two endpoints' own secrets and
 * events of the other mode. Every event is built from stripe-mock's fixtures (test/support/stripe-events.ts).
 */
describe('Stripe Issuing decisions (increments, deadline, secrets, mode)', () => {
  let harness: StripeIssuingHarness;
  let stripeMock: StripeMock | null;
  let app: TestApp;
  let org: TestOrganization;
  let live: string;
  const termsAcceptance = { accepted_at: '2026-11-02T10:15:00Z', ip: '198.51.100.7', user_agent: 'Mozilla/5.0 (card-holder)' };

  before(async () => {
    // A Celtic-backed program: every live cardholder has accepted its Authorized User Terms.
    harness = await startStripeIssuingHarness('Stripe decisions', { STRIPE_ISSUING_DECISION_TIMEOUT_MS: String(DECISION_TIMEOUT_MS), STRIPE_ISSUING_CELTIC_TERMS: 'true' });
    ({ stripeMock, app, org, live } = harness);
  });
  after(() => harness?.stop());

  /** A live card at Stripe (stripe-mock), active and funded with `amount` cents. */
  const liveCard = async (amount: number, cardLimits: Record<string, string> = {}) => {
    const created = await app.request('POST', '/api/cards', {
      key: live,
      body: { amount, card_type: 'virtual', currency: 'USD', name: 'Grace Hopper', customer: { ...validCustomer(), terms_acceptance: termsAcceptance }, card_limits: cardLimits },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.body.data.card.id as string;
    // Provisioned (minted, synced) and its initial funding settled: nothing of its own still reaches Stripe.
    await (await localTemporal()).client.workflow.getHandle(`card-provisioning-${id}`).result();
    await eventually(async () => ((await balance(id)) === String(amount) ? true : undefined), 'the live card to be funded');
    return (await testOrm()).em.fork().findOneOrFail(Card, { id });
  };
  const balance = async (cardId: string) => (await app.request('GET', `/api/cards/${cardId}`, { key: live })).body.data.card.balance_amount as string;
  const issued = (card: Card) => ({ issuerCardId: card.issuerCardId!, cardId: card.id, organizationId: org.organizationId });
  /** A request on the authorization: `amount` more to hold on top of `held`, after the requests `decided`. */
  const request = async (card: Card, id: string, amount: number, held = 0, decided: number[] = []) =>
    eventOf(stripeMock!, 'issuing_authorization.request', await authorizationObject(stripeMock!, issued(card), id, { status: 'pending', amount: held, pendingAmount: amount, decided }));
  const authorizationEvent = async (card: Card, id: string, state: AuthorizationState, type = 'issuing_authorization.updated') =>
    eventOf(stripeMock!, type, await authorizationObject(stripeMock!, issued(card), id, state));
  const decide = (payload: string, secret = stripeMock!.authorizationSecret, target = app) => postSigned(target, AUTHORIZATIONS_PATH, payload, secret);
  const notify = (payload: string, secret = stripeMock!.eventSecret) => postSigned(app, EVENTS_PATH, payload, secret);
  const decision = async (payload: string) => {
    const response = await decide(payload);
    assert.equal(response.status, 200, response.text);
    return (response.body as { approved: boolean }).approved;
  };
  const acknowledged = async (payload: string) => {
    const response = await notify(payload);
    assert.deepEqual([response.status, response.body], [200, { received: true }], response.text);
  };
  /** The card's transactions under the authorization, oldest first: type, status, amount, decline reason, reference. */
  const movements = async (card: Card, authorizationId: string) => {
    const reference = issuerRequestReference(authorizationId, 0);
    const found = await (await testOrm()).em.fork().find(
      CardTransaction,
      { card: card.id, $or: [{ reference }, { reference: { $like: `${reference}:%` } }] },
      { orderBy: { createdAt: 'asc', id: 'asc' } },
    );
    return found.map((tx) => [tx.type, tx.status, tx.amount, tx.failureReason ?? null, tx.reference]);
  };

  it('judges each incremental authorization as a new hold against the balance and limits, never a replay of the first approval', async function () {
    const mock = needStripeMock(this, stripeMock);
    const card = await liveCard(1_000, { single_transaction: '6.00' });
    const first = stripeId('iauth');
    assert.equal(await decision(await request(card, first, 300)), true);
    assert.equal(await balance(card.id), '700');
    // Stripe asks again on the same authorization: 200 more on the 300 it holds.
    const increment = await request(card, first, 200, 300, [300]);
    assert.equal(await decision(increment), true);
    assert.equal(await balance(card.id), '500');
    // The same request again (Stripe retried it): its recorded decision, nothing held twice.
    assert.equal(await decision(increment), true);
    assert.equal(await balance(card.id), '500');
    // 150 more would make the purchase 650, over its single-transaction limit of 600: declined, though the balance covers it.
    assert.equal(await decision(await request(card, first, 150, 500, [300, 200])), false);

    const second = stripeId('iauth');
    assert.equal(await decision(await request(card, second, 450)), true);
    assert.equal(await balance(card.id), '50');
    // An increment the balance cannot cover is declined, though its authorization was approved.
    assert.equal(await decision(await request(card, second, 100, 450, [450])), false);
    assert.equal(await balance(card.id), '50');

    // Stripe's created event of the first approval arrives late: written before the increment, it moves nothing.
    await acknowledged(await authorizationEvent(card, first, { status: 'pending', amount: 300, decided: [300] }, 'issuing_authorization.created'));
    await acknowledged(await authorizationEvent(card, first, { status: 'pending', amount: 500, decided: [300, 200, 150] }));
    assert.equal(await balance(card.id), '50');
    // Then the hold falls to 400 (a partial reversal after the increment) and 450 is captured.
    await acknowledged(await authorizationEvent(card, first, { status: 'pending', amount: 400, decided: [300, 200, 150] }));
    assert.equal(await balance(card.id), '150');
    await acknowledged(await eventOf(mock, 'issuing_transaction.created', await transactionObject(mock, issued(card), stripeId('ipi'), 'capture', 450, first)));
    assert.equal(await balance(card.id), '100');
    const reference = (index: number) => issuerRequestReference(first, index);
    assert.deepEqual(
      (await movements(card, first)).map(([type, status, amount, reason]) => [type, status, amount, reason]),
      [
        ['purchase', 'completed', '300', null],
        ['purchase', 'completed', '200', null],
        ['purchase', 'declined', '150', 'spending_limit_transaction'],
        ['reversal', 'completed', '100', null],
        ['capture_adjustment', 'completed', '50', null],
      ],
    );
    assert.deepEqual((await movements(card, first)).slice(0, 3).map((row) => row[4]), [reference(0), reference(1), reference(2)]);
    assert.deepEqual((await movements(card, second)).map(([type, status, amount, reason]) => [type, status, amount, reason]), [
      ['purchase', 'completed', '450', null],
      ['purchase', 'declined', '100', 'insufficient_funds'],
    ]);
  });

  it("declines, recording nothing and counting it, when the card's lock is not free within the decision's budget", async function () {
    needStripeMock(this, stripeMock);
    const card = await liveCard(1_000);
    const id = stripeId('iauth');
    const payload = await request(card, id, 100);
    // Someone else holds the card's row (a long funding, a stuck session) until the decision has been answered.
    const answered = await (await testOrm()).em.fork().transactional(async (holder) => {
      await holder.execute('select id from cards where id = ? for update', [card.id]);
      return decide(payload);
    });
    assert.deepEqual([answered.status, answered.body], [200, { approved: false }], answered.text);
    assert.deepEqual(await movements(card, id), []);
    assert.equal(await balance(card.id), '1000');
    const metrics = await app.request('GET', '/metrics');
    assert.match(metrics.text, /^stripe_issuing_authorization_timeouts_total [1-9]/m);
  });

  it('answers the decision without waiting on Temporal: the webhook deliveries it records are started after, detached', async function () {
    this.timeout(60_000);
    needStripeMock(this, stripeMock);
    const card = await liveCard(1_000);
    // The card has a webhook_url (set behind the API: no delivery of it is meant to leave this test), so its card.authorization is delivered.
    await (await testOrm()).em.fork().nativeUpdate(Card, { id: card.id }, { webhookUrl: 'https://192.0.2.1/card-events' });
    // A Temporal that takes connections and never answers: every start hangs until its deadline.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const connection = Connection.lazy({ address: `127.0.0.1:${(silent.address() as net.AddressInfo).port}` });
    const stalled = await startTestApp({ config: harness.config, temporal: { connection, client: new Client({ connection }) } });
    try {
      const answer = await decide(await request(card, stripeId('iauth'), 100), stripeMock!.authorizationSecret, stalled);
      assert.deepEqual([answer.status, answer.body], [200, { approved: true }], answer.text);
      // Answered while the delivery's start is still in flight (a start gives up after 5 s and counts an attempt on its row).
      const deliveries = await (await testOrm()).em.fork().find(WorkflowStart, { organizationId: org.organizationId, workflowType: 'webhookDeliveryWorkflow' });
      const pending = deliveries.filter((start) => start.startedAt === null && start.attempts === 0);
      assert.equal(pending.length, 1, JSON.stringify(deliveries.map((start) => [start.workflowId, start.startedAt, start.attempts])));
      await (await testOrm()).em.fork().nativeDelete(WorkflowStart, { id: pending[0]!.id });
    } finally {
      await stalled.close();
      silent.close();
    }
  });

  it('takes each endpoint with its own secret and its own events, and only events of its Stripe mode', async function () {
    const mock = needStripeMock(this, stripeMock);
    const card = await liveCard(1_000);
    const id = stripeId('iauth');
    const requested = await request(card, id, 100);
    const wrongSecret = await decide(requested, mock.eventSecret);
    assert.deepEqual([wrongSecret.status, wrongSecret.body.error?.code], [400, 'invalid_signature'], wrongSecret.text);
    const update = await authorizationEvent(card, id, { status: 'reversed', amount: 0, decided: [100] });
    const misrouted = await decide(update);
    assert.deepEqual([misrouted.status, misrouted.body.error?.code], [400, 'unexpected_event_type'], misrouted.text);
    const eventWithAuthorizationSecret = await notify(update, mock.authorizationSecret);
    assert.deepEqual([eventWithAuthorizationSecret.status, eventWithAuthorizationSecret.body.error?.code], [400, 'invalid_signature'], eventWithAuthorizationSecret.text);
    // Stripe also sends the request as an event: the event endpoint acknowledges it and decides nothing.
    await acknowledged(requested);
    assert.deepEqual(await movements(card, id), []);

    // This service runs Stripe's test mode (stripe-mock): a live-mode request is declined, a live-mode event refused.
    const liveRequest = JSON.parse(requested) as Stripe.Event;
    liveRequest.livemode = true;
    const declined = await decide(JSON.stringify(liveRequest));
    assert.deepEqual([declined.status, declined.body], [200, { approved: false }], declined.text);
    assert.deepEqual(await movements(card, id), []);
    assert.equal(await decision(requested), true);
    const liveUpdate = JSON.parse(update) as Stripe.Event;
    liveUpdate.livemode = true;
    const refused = await notify(JSON.stringify(liveUpdate));
    assert.deepEqual([refused.status, refused.body.error?.code], [400, 'livemode_mismatch'], refused.text);
    assert.equal(await balance(card.id), '900');
    await acknowledged(update);
    assert.equal(await balance(card.id), '1000');
  });

  it("gives Stripe each live cardholder's acceptance of Celtic's terms, and refuses a live card without one", async function () {
    const mock = needStripeMock(this, stripeMock);
    const customer = validCustomer({ first_name: 'Terms', last_name: 'Missing' });
    const refused = await app.request('POST', '/api/cards', { key: live, body: { amount: 0, card_type: 'virtual', currency: 'USD', name: 'No Terms', customer } });
    assert.deepEqual([refused.status, refused.body.error?.code, refused.body.error?.param], [400, 'validation_failed', 'customer.terms_acceptance'], refused.text);
    const em = (await testOrm()).em.fork();
    assert.equal(await em.count(Customer, { organization: org.organizationId, firstName: 'Terms' }), 0);
    // A sandbox card has no issuer program to accept terms of.
    const sandbox = await app.request('POST', '/api/cards', { key: org.secret, body: { amount: 0, card_type: 'virtual', currency: 'USD', name: 'No Terms', customer } });
    assert.equal(sandbox.status, 201, sandbox.text);
    const badIp = await app.request('POST', '/api/cards', {
      key: live,
      body: { amount: 0, card_type: 'virtual', currency: 'USD', name: 'No Terms', customer: { ...customer, terms_acceptance: { ...termsAcceptance, ip: 'not-an-ip' } } },
    });
    assert.deepEqual([badIp.status, badIp.body.error?.param], [400, 'customer.terms_acceptance.ip'], badIp.text);

    await liveCard(0);
    // Sent as the cardholder's individual.card_issuing.user_terms_acceptance, accepted by Stripe's API (stripe-mock validates it).
    const sent = await acceptedRequestTo(mock, 'POST', '/v1/issuing/cardholders', 'user_terms_acceptance', 'ip:198.51.100.7', `date:${Date.parse(termsAcceptance.accepted_at) / 1000}`);
    assert.ok(sent.includes('Mozilla/5.0 (card-holder)'), sent);
  });

  it("ends a card sync Stripe refuses with a state on the card and an event, not retried; the next sync Stripe takes clears it", async function () {
    this.timeout(90_000);
    needStripeMock(this, stripeMock);
    const card = await liveCard(0);
    const em = (await testOrm()).em.fork();
    // A card Stripe does not know (stripe-mock answers its path 404, invalid_request_error): every update of it is refused.
    await em.nativeUpdate(Card, { id: card.id }, { issuerCardId: `${card.issuerCardId}/gone` });
    const frozen = await app.request('POST', `/api/cards/${card.id}/status`, { key: live, body: { status: 'frozen' } });
    assert.equal(frozen.status, 200, frozen.text);
    const [sync] = await em.find(WorkflowStart, { workflowId: { $like: `card-issuer-sync-${card.id}-%` } }, { orderBy: { createdAt: 'desc' }, limit: 1 });
    // The run ends (it would otherwise retry until the test times out).
    await (await localTemporal()).client.workflow.getHandle(sync!.workflowId).result();
    const refused = await em.fork().findOneOrFail(Card, { id: card.id });
    assert.match(refused.issuerSyncFailure ?? '', /^Stripe refused the card's update: Unrecognized request URL/);
    assert.ok(refused.issuerSyncFailedAt);
    const announced = await em.fork().find(Event, { organization: org.organizationId, type: 'card.issuer_sync_failed' });
    assert.deepEqual(
      announced.map((event) => (event.data as { card_id: string; status: string }).card_id + ':' + (event.data as { status: string }).status),
      [`${card.id}:frozen`],
    );

    await em.nativeUpdate(Card, { id: card.id }, { issuerCardId: card.issuerCardId });
    const unfrozen = await app.request('POST', `/api/cards/${card.id}/status`, { key: live, body: { status: 'active' } });
    assert.equal(unfrozen.status, 200, unfrozen.text);
    await eventually(async () => ((await em.fork().findOneOrFail(Card, { id: card.id })).issuerSyncFailedAt === null ? true : undefined), 'the refusal to be cleared');
  });

  it('reconciles Stripe Issuing with the cards on a Schedule: an authorization Stripe no longer holds is a drift, announced once, resolved once they agree', async function () {
    this.timeout(90_000);
    needStripeMock(this, stripeMock);
    const schedule = scheduleDefinitions(testConfig(harness.config)).find((definition) => definition.scheduleId === STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID);
    assert.equal(schedule?.action.workflowType, stripeIssuingReconciliationWorkflowType);
    assert.ok(!scheduleDefinitions(testConfig({ STRIPE_ISSUING_SECRET_KEY: undefined })).some((definition) => definition.scheduleId === STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID), 'no Stripe, no reconciliation');

    const card = await liveCard(1_000);
    const id = stripeId('iauth');
    assert.equal(await decision(await request(card, id, 250)), true);
    const { client } = await localTemporal();
    const reconcile = () =>
      client.workflow.execute(stripeIssuingReconciliationWorkflowType, { workflowId: `test-issuing-reconciliation-${randomUUID()}`, args: [{ organizationId: org.organizationId }], taskQueue: harness.taskQueue });
    const drifts = async () => (await testOrm()).em.fork().find(CardIssuerDrift, { organization: org.organizationId, subject: 'authorization', subjectId: id }, { orderBy: { firstSeenAt: 'asc' } });
    const announced = async () =>
      (await (await testOrm()).em.fork().find(Event, { organization: org.organizationId, type: 'card_issuer.drift' })).filter((event) => (event.data as { authorization_id: string }).authorization_id === id);

    // stripe-mock lists only its own fixture (on a card that is not ours) as pending: Stripe holds nothing for the 250 we charged.
    await reconcile();
    await reconcile();
    assert.deepEqual((await drifts()).map((drift) => [drift.status, drift.ourAmount, drift.issuerAmount, drift.card?.id]), [['open', '250', '0', card.id]]);
    const events = await announced();
    assert.equal(events.length, 1, 'announced once, however many passes see it');
    assert.deepEqual((events[0]!.data as { our_amount: string; issuer_amount: string; difference: string }).difference, '-250');
    const metrics = await app.request('GET', '/metrics');
    assert.match(metrics.text, /^stripe_issuing_drifts\{subject="authorization"\} [1-9]/m);

    // The reversal we had missed arrives: the card is charged nothing for it, as Stripe holds nothing.
    await acknowledged(await authorizationEvent(card, id, { status: 'reversed', amount: 0, decided: [250] }));
    await reconcile();
    assert.deepEqual((await drifts()).map((drift) => drift.status), ['resolved']);
  });
});
