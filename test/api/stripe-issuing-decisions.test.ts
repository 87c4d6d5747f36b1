import assert from 'node:assert/strict';
import net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import Stripe from 'stripe';
import { issuerRequestReference } from '../../src/cards/authorization';
import { Card, Customer } from '../../src/cards/entities';
import { createOrm } from '../../src/db/orm';
import { WorkflowStart } from '../../src/temporal/entities';
import { startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { validCustomer } from '../support/cards';
import { testConfig, testOrm } from '../support/environment';
import { eventOf, stripeId, transactionObject } from '../support/stripe-events';
import { startStripeIssuingHarness, stripeIssuingCases, TERMS_ACCEPTANCE, type StripeIssuingHarness } from '../support/stripe-issuing';
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

  before(async () => {
    // A Celtic-backed program: every live cardholder has accepted its Authorized User Terms.
    harness = await startStripeIssuingHarness('Stripe decisions', { STRIPE_ISSUING_DECISION_TIMEOUT_MS: String(DECISION_TIMEOUT_MS), STRIPE_ISSUING_CELTIC_TERMS: 'true' });
    ({ stripeMock, app, org, live } = harness);
  });
  after(() => harness?.stop());

  const { liveCard, balance, issued, request, authorizationEvent, decide, notify, decision, acknowledged, movements } = stripeIssuingCases(() => harness);

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

  it('declines within its budget when no database connection is free, counted, and decides nothing once one is', async function () {
    this.timeout(60_000);
    needStripeMock(this, stripeMock);
    const card = await liveCard(1_000);
    const id = stripeId('iauth');
    const payload = await request(card, id, 100);
    // An API process whose pool has one connection, taken by someone else (a long transaction) while Stripe asks.
    const orm = await createOrm(testConfig().DATABASE_URL, 1);
    const narrow = await startTestApp({ config: harness.config, orm });
    try {
      const { answered, tookMs } = await orm.em.fork().transactional(async (holder) => {
        await holder.execute('select 1');
        const asked = performance.now();
        const answer = await decide(payload, stripeMock!.authorizationSecret, narrow);
        return { answered: answer, tookMs: performance.now() - asked };
      });
      assert.deepEqual([answered.status, answered.body], [200, { approved: false }], answered.text);
      assert.ok(tookMs < 2_000, `answered after ${Math.round(tookMs)} ms: Stripe waits 2 s`);
      // The pool hands its connection out in turn: this transaction gets it after the waiting decision has given it back.
      await orm.em.fork().transactional((after) => after.execute('select 1'));
      assert.deepEqual(await movements(card, id), []);
      assert.equal(await balance(card.id), '1000');
      assert.match((await narrow.request('GET', '/metrics')).text, /^stripe_issuing_authorization_timeouts_total 1$/m);
    } finally {
      await narrow.close();
      await orm.close();
    }
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
      body: { amount: 0, card_type: 'virtual', currency: 'USD', name: 'No Terms', customer: { ...customer, terms_acceptance: { ...TERMS_ACCEPTANCE, ip: 'not-an-ip' } } },
    });
    assert.deepEqual([badIp.status, badIp.body.error?.param], [400, 'customer.terms_acceptance.ip'], badIp.text);

    await liveCard(0);
    // Sent as the cardholder's individual.card_issuing.user_terms_acceptance, accepted by Stripe's API (stripe-mock validates it).
    const sent = await acceptedRequestTo(mock, 'POST', '/v1/issuing/cardholders', 'user_terms_acceptance', 'ip:198.51.100.7', `date:${Date.parse(TERMS_ACCEPTANCE.accepted_at) / 1000}`);
    assert.ok(sent.includes('Mozilla/5.0 (card-holder)'), sent);
  });

  it("gives a cardholder made without Celtic's terms the acceptance its customer's next card carries", async function () {
    this.timeout(60_000);
    const mock = needStripeMock(this, stripeMock);
    const customer = validCustomer({ first_name: 'Earlier', last_name: 'Holder' });
    const first = await liveCard(0, {}, { ...customer, terms_acceptance: TERMS_ACCEPTANCE });
    const em = (await testOrm()).em.fork();
    // As a customer whose cardholder Stripe made before the program needed the terms (or before they were kept): none kept.
    await em.nativeUpdate(Customer, { id: first.customer.id }, { termsAcceptance: null });
    const { issuerCardholderId } = await em.findOneOrFail(Customer, { id: first.customer.id });
    assert.ok(issuerCardholderId);

    const refused = await app.request('POST', '/api/cards', { key: live, body: { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Next', customer } });
    assert.deepEqual([refused.status, refused.body.error?.param], [400, 'customer.terms_acceptance'], refused.text);
    const accepted = { accepted_at: '2026-11-20T08:00:00Z', ip: '203.0.113.9' };
    await liveCard(0, {}, { ...customer, terms_acceptance: accepted });
    assert.deepEqual((await em.fork().findOneOrFail(Customer, { id: first.customer.id })).termsAcceptance, { ...accepted, user_agent: null });
    // Stripe's cardholder is updated with it (stripe-mock validates the parameters against Stripe's OpenAPI document).
    await acceptedRequestTo(mock, 'POST', `/v1/issuing/cardholders/${issuerCardholderId}`, 'user_terms_acceptance', 'ip:203.0.113.9', `date:${Date.parse(accepted.accepted_at) / 1000}`);
  });
});
