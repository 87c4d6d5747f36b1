import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import Stripe from 'stripe';
import { issuerAuthorizationReference } from '../../src/cards/authorization';
import { Card, CardTransaction, Customer } from '../../src/cards/entities';
import { Event } from '../../src/events/entities';
import { stripeIssuingFor } from '../../src/cards/providers/stripe-issuer';
import { verifyLedger } from '../../src/ledger/invariants';
import { ledgerProjections } from '../../src/registries';
import { WorkflowStart } from '../../src/temporal/entities';
import { workflowBundle } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { validCustomer } from '../support/cards';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { AUTHORIZATIONS_PATH, authorizationObject, EVENTS_PATH, eventOf, postSigned, stripeId, transactionObject, type AuthorizationState, type IssuedCard } from '../support/stripe-events';
import { startStripeIssuingHarness, type StripeIssuingHarness } from '../support/stripe-issuing';
import { acceptedRequestTo, needStripeMock, type StripeMock } from '../support/stripe-mock';
import { cardPostings } from '../support/ledger';

const HOUR = 3600_000;
const AUTHORIZATIONS = AUTHORIZATIONS_PATH;
const EVENTS = EVENTS_PATH;

/**
 * Live cards through Stripe Issuing, against stripe-mock (which validates every request against
 * Stripe's published API and answers its fixtures: it keeps no state, so what it was sent is read
 * from its log), and Stripe's real-time authorization webhook signed with the SDK's test helper.
 */
describe('Stripe Issuing (live cards)', () => {
  let harness: StripeIssuingHarness;
  let stripeMock: StripeMock | null;
  let app: TestApp;
  let org: TestOrganization;
  let live: string;
  const signer = new Stripe('sk_test_signer');

  before(async () => {
    harness = await startStripeIssuingHarness('Stripe Issuing');
    ({ stripeMock, app, org, live } = harness);
  });
  after(() => harness?.stop());

  const getCard = async (cardId: string) => (await app.request('GET', `/api/cards/${cardId}`, { key: live })).body.data.card;
  const cardRow = async (cardId: string) => (await testOrm()).em.fork().findOneOrFail(Card, { id: cardId }, { populate: ['customer'] });

  const issued = (card: Pick<Card, 'id' | 'issuerCardId'>): IssuedCard => ({ issuerCardId: card.issuerCardId!, cardId: card.id, organizationId: org.organizationId });
  /**
   * An issuing_authorization.request event for the card, as Stripe sends it (from stripe-mock's fixtures): a new
   * authorization of `amount`, or with `earlier` an incremental one adding `amount` to what is held after the requests decided.
   */
  const requestEvent = async (card: Pick<Card, 'id' | 'issuerCardId'>, amount: number, authorizationId = stripeId('iauth'), earlier = { held: 0, decided: [] as number[] }) =>
    eventOf(stripeMock!, 'issuing_authorization.request', await authorizationObject(stripeMock!, issued(card), authorizationId, { status: 'pending', amount: earlier.held, pendingAmount: amount, decided: earlier.decided }));
  /** To the real-time authorization endpoint, signed with its secret unless another is given. */
  const decide = (payload: string, secret = stripeMock!.authorizationSecret) => postSigned(app, AUTHORIZATIONS, payload, secret);
  /** To the event endpoint, signed with its secret unless another is given. */
  const notify = (payload: string, secret = stripeMock!.eventSecret) => postSigned(app, EVENTS, payload, secret);

  let cardId: string;

  it('mints a live card at Stripe: a cardholder from our customer, a virtual card with the balance and limits as spending controls', async function () {
    const mock = needStripeMock(this, stripeMock);
    const customer = validCustomer({ first_name: 'Grace', last_name: 'Hopper', email: 'grace@example.com' });
    const created = await app.request('POST', '/api/cards', {
      key: live,
      body: { amount: 1_000, card_type: 'virtual', currency: 'USD', name: 'Grace Hopper', customer, card_limits: { single_transaction: '5.00', daily: '20.00' } },
    });
    assert.equal(created.status, 201, created.text);
    cardId = created.body.data.card.id;
    const card = await eventually(async () => {
      const current = await getCard(cardId);
      return current.status === 'active' && current.balance_amount === '1000' ? current : undefined;
    }, 'the live card to be active and funded');
    const row = await cardRow(cardId);
    assert.match(row.issuerCardId!, /^ic_/);
    assert.match(row.customer.issuerCardholderId!, /^ich_/);
    assert.equal(card.last_four, '4242', "stripe-mock's fixture card");

    const cardholder = await acceptedRequestTo(mock, 'POST', '/v1/issuing/cardholders', 'name:Grace Hopper', 'email:grace@example.com', 'country:US', 'phone_number:+15550100');
    assert.ok(!cardholder.includes('validation error'), cardholder);
    // Created active with nothing to spend, then given its limits, then the initial funding once it settled.
    await acceptedRequestTo(mock, 'POST', '/v1/issuing/cards', 'type:virtual', 'status:active', `card_id:${cardId}`, 'amount:0 interval:all_time');
    const cardPath = `/v1/issuing/cards/${row.issuerCardId}`;
    await acceptedRequestTo(mock, 'POST', cardPath, 'status:active', 'amount:500 interval:per_authorization', 'amount:2000 interval:daily', 'amount:0 interval:all_time');
    await acceptedRequestTo(mock, 'POST', cardPath, 'status:active', 'amount:500 interval:per_authorization', 'amount:2000 interval:daily', 'amount:1000 interval:all_time');
    assert.ok(!mock.output().includes('Request validation error'), 'stripe-mock accepted every request');
    // Stripe keeps the number and CVV (stripe-mock hands none over): nothing of them is stored.
    assert.equal(row.secrets, null);
    const secure = await app.request('GET', `/api/cards/${cardId}/secure`, { key: live });
    assert.equal(secure.status, 409, secure.text);
  });

  it("approves an authorization within the card's balance and limits, answering Stripe's synchronous decision", async function () {
    needStripeMock(this, stripeMock);
    const card = await cardRow(cardId);
    const payload = await requestEvent(card, 400, 'iauth_approved');
    const response = await decide(payload);
    assert.equal(response.status, 200, response.text);
    assert.deepEqual(response.body, { approved: true });
    assert.equal(response.headers.get('stripe-version'), Stripe.API_VERSION);
    assert.equal((await getCard(cardId)).balance_amount, '600');

    // Stripe retries a request it got no answer to: the same decision, nothing spent twice.
    const replay = await decide(payload);
    assert.deepEqual([replay.status, replay.body], [200, { approved: true }]);
    assert.equal((await getCard(cardId)).balance_amount, '600');
    const recorded = await (await testOrm()).em.fork().find(CardTransaction, { card: cardId, reference: issuerAuthorizationReference('iauth_approved') });
    assert.deepEqual(recorded.map((tx) => [tx.type, tx.status, tx.amount, tx.merchantName]), [['purchase', 'completed', '400', 'Corner Coffee']]);
  });

  it('declines an authorization over a spend limit or the balance, recording the decline and moving nothing', async function () {
    needStripeMock(this, stripeMock);
    const card = await cardRow(cardId);
    const overLimit = await decide(await requestEvent(card, 501, 'iauth_over_limit'));
    assert.deepEqual([overLimit.status, overLimit.body], [200, { approved: false }]);
    const atLimit = await decide(await requestEvent(card, 500, 'iauth_at_limit'));
    assert.deepEqual(atLimit.body, { approved: true });
    const nothingLeft = await decide(await requestEvent(card, 200, 'iauth_over_balance'));
    assert.deepEqual(nothingLeft.body, { approved: false });
    assert.equal((await getCard(cardId)).balance_amount, '100');
    const em = (await testOrm()).em.fork();
    const declined = await em.find(CardTransaction, { card: cardId, status: 'declined' }, { orderBy: { createdAt: 'asc' } });
    assert.deepEqual(declined.map((tx) => [tx.reference, tx.failureReason]), [
      [issuerAuthorizationReference('iauth_over_limit'), 'spending_limit_transaction'],
      [issuerAuthorizationReference('iauth_over_balance'), 'insufficient_funds'],
    ]);
  });

  it('answers 400 to a bad signature or a tampered body and changes nothing; declines a card that is not ours, recording nothing', async function () {
    const mock = needStripeMock(this, stripeMock);
    const card = await cardRow(cardId);
    const em = (await testOrm()).em.fork();
    const before = await em.count(CardTransaction, { card: cardId });
    const payload = await requestEvent(card, 50);
    const wrongSecret = await decide(payload, `whsec_${'A'.repeat(32)}`);
    assert.equal(wrongSecret.status, 400, wrongSecret.text);
    assert.equal(wrongSecret.body.error.code, 'invalid_signature');
    const signature = signer.webhooks.generateTestHeaderString({ payload, secret: mock.authorizationSecret });
    const tampered = await app.request('POST', AUTHORIZATIONS, {
      rawBody: payload.replace('"amount":50,', '"amount":5,'),
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
    });
    assert.equal(tampered.status, 400, tampered.text);
    assert.equal(tampered.body.error.code, 'invalid_signature');
    const unsigned = await app.request('POST', AUTHORIZATIONS, { rawBody: payload, headers: { 'content-type': 'application/json' } });
    assert.equal(unsigned.status, 400, unsigned.text);

    const stranger = { ...card, issuerCardId: 'ic_not_ours' } as Card;
    const notOurs = await decide(await requestEvent(stranger, 50));
    assert.deepEqual([notOurs.status, notOurs.body], [200, { approved: false }]);
    assert.equal(await em.count(CardTransaction, { card: cardId }), before);
    assert.equal((await getCard(cardId)).balance_amount, '100');
  });

  it("carries freeze (inactive), unfreeze, new limits and termination (canceled) to Stripe's copy of the card", async function () {
    this.timeout(120_000);
    const mock = needStripeMock(this, stripeMock);
    const { issuerCardId } = await cardRow(cardId);
    const cardPath = `/v1/issuing/cards/${issuerCardId}`;
    const frozen = await app.request('POST', `/api/cards/${cardId}/status`, { key: live, body: { status: 'frozen' } });
    assert.equal(frozen.status, 200, frozen.text);
    await acceptedRequestTo(mock, 'POST', cardPath, 'status:inactive');
    const [freezeSync] = await (await testOrm()).em.fork().find(WorkflowStart, { workflowId: { $like: `card-issuer-sync-${cardId}-%` } }, { orderBy: { createdAt: 'asc' }, limit: 1 });
    const freezeHandle = (await localTemporal()).client.workflow.getHandle(freezeSync!.workflowId);
    await freezeHandle.result();
    await recordHistoryIfAsked(freezeHandle, 'card-issuer-sync');
    // Frozen here is declined here, whatever Stripe's copy says meanwhile.
    const whileFrozen = await decide(await requestEvent(await cardRow(cardId), 10));
    assert.deepEqual(whileFrozen.body, { approved: false });
    const limits = await app.request('PUT', `/api/cards/${cardId}/spend-limits`, { key: live, body: { transaction: 300, all_time: 700 } });
    assert.equal(limits.status, 200, limits.text);
    // All time: 900 spent plus 100 left would be 1000, held to the card's own 700.
    await acceptedRequestTo(mock, 'POST', cardPath, 'status:inactive', 'amount:300 interval:per_authorization', 'amount:700 interval:all_time');
    const unfrozen = await app.request('POST', `/api/cards/${cardId}/status`, { key: live, body: { status: 'active' } });
    assert.equal(unfrozen.status, 200, unfrozen.text);
    await acceptedRequestTo(mock, 'POST', cardPath, 'status:active', 'amount:300 interval:per_authorization');

    await (await testOrm()).em.fork().nativeUpdate(Card, { id: cardId }, { createdAt: new Date(Date.now() - 25 * HOUR) });
    const terminated = await app.request('DELETE', `/api/cards/${cardId}`, { key: live, body: { reason: 'done' } });
    assert.ok([200, 202].includes(terminated.status), terminated.text);
    await eventually(async () => ((await getCard(cardId)).status === 'terminated' ? true : undefined), 'termination');
    await acceptedRequestTo(mock, 'POST', cardPath, 'status:canceled');
    assert.ok(!mock.output().includes('Request validation error'), 'stripe-mock accepted every request');
  });

  describe("after the decision: the card's balance follows Stripe", () => {
    let followed: Card;
    const authorizationId = () => stripeId('iauth');
    /** An issuing_authorization.updated (or .created) event: the authorization as Stripe now has it, after the one request we decided. */
    const authorizationUpdate = async (card: Pick<Card, 'id' | 'issuerCardId'>, id: string, state: AuthorizationState, type = 'issuing_authorization.updated') =>
      eventOf(stripeMock!, type, await authorizationObject(stripeMock!, issued(card), id, { decided: [state.amount], ...state }));
    /** An issuing_transaction.created event: Stripe names the card by id only, and signs a capture's amount negative. */
    const transactionCreated = async (issuerCardId: string, id: string, type: 'capture' | 'refund', amount: number, authorization: string | null) =>
      eventOf(stripeMock!, 'issuing_transaction.created', await transactionObject(stripeMock!, { issuerCardId }, id, type, amount, authorization));
    const acknowledged = async (payload: string) => {
      const response = await notify(payload);
      assert.deepEqual([response.status, response.body], [200, { received: true }], response.text);
    };
    const authorize = async (amount: number, id: string) => {
      const response = await decide(await requestEvent(followed, amount, id));
      assert.deepEqual(response.body, { approved: true }, response.text);
    };
    const balance = async () => (await getCard(followed.id)).balance_amount;
    /** The card's transactions for the authorization (its purchase and what followed) or a reference, oldest first: type, amount, before, after. */
    const movements = async (reference: string) => {
      const em = (await testOrm()).em.fork();
      const transactions = await em.find(
        CardTransaction,
        { card: followed.id, $or: [{ reference }, { reference: { $like: `${reference}:%` } }] },
        { orderBy: { createdAt: 'asc', id: 'asc' } },
      );
      return transactions.map((tx) => [tx.type, tx.status, tx.amount, tx.balanceBefore, tx.balanceAfter]);
    };

    before(async function () {
      if (!stripeMock) return;
      const created = await app.request('POST', '/api/cards', {
        key: live,
        body: { amount: 10_000, card_type: 'virtual', currency: 'USD', name: 'Alan Turing', customer: validCustomer({ first_name: 'Alan', last_name: 'Turing' }) },
      });
      assert.equal(created.status, 201, created.text);
      const cardId = created.body.data.card.id;
      await eventually(async () => ((await getCard(cardId)).balance_amount === '10000' ? true : undefined), 'the second live card to be active and funded');
      followed = await cardRow(cardId);
    });

    it('gives a fully reversed authorization back once, announced as a reversal; a replay moves nothing', async function () {
      needStripeMock(this, stripeMock);
      const id = authorizationId();
      await authorize(300, id);
      // Stripe's created event for the authorization we approved: pending, the whole amount held.
      await acknowledged(await authorizationUpdate(followed, id, { status: 'pending', amount: 300 }, 'issuing_authorization.created'));
      assert.equal(await balance(), '9700');
      const reversed = await authorizationUpdate(followed, id, { status: 'reversed', amount: 0 });
      await acknowledged(reversed);
      await acknowledged(reversed);
      assert.equal(await balance(), '10000');
      const reference = issuerAuthorizationReference(id);
      assert.deepEqual(await movements(reference), [
        ['purchase', 'completed', '300', '10000', '9700'],
        ['reversal', 'completed', '300', '9700', '10000'],
      ]);
      assert.deepEqual((await cardPostings({ id: followed.id, organizationId: org.organizationId })).slice(-2), [
        { kind: 'purchase', lines: [['card:card:usd:available', '-300'], ['card_issuer:org:live:usd', '300']] },
        { kind: 'reversal', lines: [['card:card:usd:available', '300'], ['card_issuer:org:live:usd', '-300']] },
      ]);
      const em = (await testOrm()).em.fork();
      const reversal = await em.findOneOrFail(CardTransaction, { card: followed.id, type: 'reversal', reference: { $like: `${reference}:%` } });
      const announced = await em.find(Event, { organization: org.organizationId, type: 'card.transaction.completed', dedupeKey: `card.transaction:${reversal.id}` });
      assert.equal(announced.length, 1);
      assert.deepEqual((announced[0]!.data as { transaction: { type: string; amount: string } }).transaction.type, 'reversal');
    });

    it("gives back an approval Stripe itself declined: the created event carries the final state", async function () {
      needStripeMock(this, stripeMock);
      const id = authorizationId();
      await authorize(120, id);
      const created = JSON.parse(await authorizationUpdate(followed, id, { status: 'closed', amount: 0 }, 'issuing_authorization.created'));
      created.data.object.approved = false;
      await acknowledged(JSON.stringify(created));
      assert.equal(await balance(), '10000');
      assert.deepEqual(await movements(issuerAuthorizationReference(id)), [
        ['purchase', 'completed', '120', '10000', '9880'],
        ['reversal', 'completed', '120', '9880', '10000'],
      ]);
    });

    it('releases a partial reversal, and an expired authorization the rest; replayed and older states move nothing', async function () {
      needStripeMock(this, stripeMock);
      const id = authorizationId();
      await authorize(500, id);
      const older = await authorizationUpdate(followed, id, { status: 'pending', amount: 500 });
      const partial = await authorizationUpdate(followed, id, { status: 'pending', amount: 200 });
      await acknowledged(partial);
      assert.equal(await balance(), '9800');
      // Stripe retries and reorders: the same state again, and the state before it, arrive late.
      await acknowledged(partial);
      await acknowledged(older);
      assert.equal(await balance(), '9800');
      // Expired (closed without a capture): the rest comes back; the older states still move nothing after it.
      await acknowledged(await authorizationUpdate(followed, id, { status: 'closed', amount: 0 }));
      await acknowledged(partial);
      await acknowledged(older);
      assert.equal(await balance(), '10000');
      assert.deepEqual(await movements(issuerAuthorizationReference(id)), [
        ['purchase', 'completed', '500', '10000', '9500'],
        ['reversal', 'completed', '300', '9500', '9800'],
        ['reversal', 'completed', '200', '9800', '10000'],
      ]);
    });

    it('debits an over-capture (tip) by the difference once; the closed authorization listing it moves nothing', async function () {
      needStripeMock(this, stripeMock);
      const id = authorizationId();
      await authorize(1_000, id);
      const capture = await transactionCreated(followed.issuerCardId!, 'ipi_over_capture', 'capture', 1_150, id);
      await acknowledged(capture);
      await acknowledged(capture);
      await acknowledged(await authorizationUpdate(followed, id, { status: 'closed', amount: 0, captures: [1_150] }));
      // An older pending state, arriving after the capture, moves nothing either.
      await acknowledged(await authorizationUpdate(followed, id, { status: 'pending', amount: 400 }));
      assert.equal(await balance(), '8850');
      assert.deepEqual(await movements(issuerAuthorizationReference(id)), [
        ['purchase', 'completed', '1000', '10000', '9000'],
        ['capture_adjustment', 'completed', '150', '9000', '8850'],
      ]);
      assert.deepEqual((await cardPostings({ id: followed.id, organizationId: org.organizationId })).slice(-2), [
        { kind: 'purchase', lines: [['card:card:usd:available', '-1000'], ['card_issuer:org:live:usd', '1000']] },
        { kind: 'capture_adjustment', lines: [['card:card:usd:available', '-150'], ['card_issuer:org:live:usd', '150']] },
      ]);
    });

    it('releases the rest of an under-capture once, whichever of the capture and the closed authorization comes first', async function () {
      needStripeMock(this, stripeMock);
      const captureFirst = authorizationId();
      await authorize(850, captureFirst);
      await acknowledged(await transactionCreated(followed.issuerCardId!, 'ipi_under_capture_1', 'capture', 600, captureFirst));
      await acknowledged(await authorizationUpdate(followed, captureFirst, { status: 'closed', amount: 0, captures: [600] }));
      assert.equal(await balance(), '8250');
      assert.deepEqual(await movements(issuerAuthorizationReference(captureFirst)), [
        ['purchase', 'completed', '850', '8850', '8000'],
        ['capture_adjustment', 'completed', '250', '8000', '8250'],
      ]);

      const closedFirst = authorizationId();
      await authorize(250, closedFirst);
      // The closed authorization lists its capture: that capture's own event settles it.
      await acknowledged(await authorizationUpdate(followed, closedFirst, { status: 'closed', amount: 0, captures: [200] }));
      assert.equal(await balance(), '8000');
      const capture = await transactionCreated(followed.issuerCardId!, 'ipi_under_capture_2', 'capture', 200, closedFirst);
      await acknowledged(capture);
      await acknowledged(capture);
      assert.equal(await balance(), '8050');
      assert.deepEqual(await movements(issuerAuthorizationReference(closedFirst)), [
        ['purchase', 'completed', '250', '8250', '8000'],
        ['capture_adjustment', 'completed', '50', '8000', '8050'],
      ]);
    });

    it("credits a refund once; a force capture beyond the balance is debited as Stripe decided, below zero", async function () {
      const mock = needStripeMock(this, stripeMock);
      const refund = await transactionCreated(followed.issuerCardId!, 'ipi_refund', 'refund', 450, null);
      await acknowledged(refund);
      await acknowledged(refund);
      assert.equal(await balance(), '8500');
      assert.deepEqual(await movements('issuer_transaction:ipi_refund'), [['refund', 'completed', '450', '8050', '8500']]);

      // Captured with no authorization of ours (Stripe's force capture): we never approved it, but Stripe paid it.
      await acknowledged(await transactionCreated(followed.issuerCardId!, 'ipi_force_capture', 'capture', 9_000, null));
      assert.equal(await balance(), '-500');
      assert.deepEqual(await movements('issuer_transaction:ipi_force_capture'), [['capture_adjustment', 'completed', '9000', '8500', '-500']]);
      // Each movement the issuer made is a posting between the card and card_issuer (the merchants, through Stripe);
      // the card's row, below zero, is still its accounts' sum: no break.
      const posted = await cardPostings({ id: followed.id, organizationId: org.organizationId });
      assert.deepEqual(posted.slice(-2), [
        { kind: 'refund', lines: [['card:card:usd:available', '450'], ['card_issuer:org:live:usd', '-450']] },
        { kind: 'capture_adjustment', lines: [['card:card:usd:available', '-9000'], ['card_issuer:org:live:usd', '9000']] },
      ]);
      assert.deepEqual(await verifyLedger((await testOrm()).em.fork(), ledgerProjections, org.organizationId), []);
      // Stripe's copy follows: what the card spent (the captures, 1950 + 9000) plus what it may spend (none) is its
      // all-time cap, the 10000 funded and the 450 refunded; reversals and capture adjustments moved both terms alike.
      await acceptedRequestTo(mock, 'POST', `/v1/issuing/cards/${followed.issuerCardId}`, 'status:active', 'amount:10450 interval:all_time');
    });

    it('acknowledges events for cards not ours and of other types, changing nothing; a bad signature is 400', async function () {
      const mock = needStripeMock(this, stripeMock);
      const em = (await testOrm()).em.fork();
      const before = await em.count(CardTransaction, { organization: org.organizationId });
      const stranger = { id: followed.id, issuerCardId: 'ic_not_ours' };
      await acknowledged(await authorizationUpdate(stranger, authorizationId(), { status: 'reversed', amount: 0 }));
      await acknowledged(await transactionCreated('ic_not_ours', 'ipi_not_ours', 'refund', 100, null));
      // Our card under another organization's name is not ours to move either.
      const elsewhere = JSON.parse(await transactionCreated(followed.issuerCardId!, 'ipi_elsewhere', 'refund', 100, null));
      elsewhere.data.object.card = { id: followed.issuerCardId, object: 'issuing.card', metadata: { organization_id: randomUUID() } };
      await acknowledged(JSON.stringify(elsewhere));
      await acknowledged(await eventOf(mock, 'issuing_card.updated', await mock.fixture<Stripe.Issuing.Card>(`/v1/issuing/cards/${followed.issuerCardId}`)));
      const forged = await notify(await transactionCreated(followed.issuerCardId!, 'ipi_forged', 'refund', 100_000, null), `whsec_${'B'.repeat(32)}`);
      assert.equal(forged.status, 400, forged.text);
      assert.equal(forged.body.error.code, 'invalid_signature');
      assert.equal(await em.count(CardTransaction, { organization: org.organizationId }), before);
      assert.equal(await balance(), '-500');
    });

    it("terminates a card the issuer took below zero without charging the company: its debt stays with the issuer, posted", async function () {
      needStripeMock(this, stripeMock);
      const usd = async () => (await (await testOrm()).em.fork().execute<{ available: string }[]>(`select available::text from company_balances where organization_id = ? and environment = 'live' and currency = 'usd'`, [org.organizationId]))[0]!.available;
      const before = await usd();
      await (await testOrm()).em.fork().nativeUpdate(Card, { id: followed.id }, { createdAt: new Date(Date.now() - 25 * HOUR) });
      const terminated = await app.request('DELETE', `/api/cards/${followed.id}`, { key: live, body: { reason: 'overdrawn' } });
      assert.ok([200, 202].includes(terminated.status), terminated.text);
      await eventually(async () => ((await getCard(followed.id)).status === 'terminated' ? true : undefined), 'termination');
      assert.deepEqual([(await getCard(followed.id)).balance_amount, await usd()], ['0', before]);
      assert.deepEqual((await cardPostings({ id: followed.id, organizationId: org.organizationId })).at(-1), {
        kind: 'termination',
        lines: [['card:card:usd:available', '500'], ['card_issuer:org:live:usd', '-500']],
      });
      assert.deepEqual(await verifyLedger((await testOrm()).em.fork(), ledgerProjections, org.organizationId), []);
    });
  });

  it('replays the recorded history of a card issuer sync with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('card-issuer-sync'), 'card-issuer-sync');
  });

  it('reads the Stripe secrets from the files their _FILE variables name, and names an unreadable file without its contents', () => {
    const folder = mkdtempSync(path.join(os.tmpdir(), 'stripe-secrets-'));
    try {
      writeFileSync(path.join(folder, 'key'), 'sk_test_fromfile\n');
      writeFileSync(path.join(folder, 'authorization'), 'whsec_authorizationfromfile\n');
      writeFileSync(path.join(folder, 'webhook'), 'whsec_fromfile\n');
      const files = {
        STRIPE_ISSUING_MODE: 'test',
        STRIPE_ISSUING_SECRET_KEY_FILE: path.join(folder, 'key'),
        STRIPE_ISSUING_AUTHORIZATION_SECRET_FILE: path.join(folder, 'authorization'),
        STRIPE_ISSUING_WEBHOOK_SECRET_FILE: path.join(folder, 'webhook'),
      };
      const issuing = stripeIssuingFor(testConfig(files));
      assert.deepEqual([issuing?.authorizationSecret, issuing?.eventSecret, issuing?.livemode], ['whsec_authorizationfromfile', 'whsec_fromfile', false]);
      assert.equal(stripeIssuingFor(testConfig({ ...files, STRIPE_ISSUING_AUTHORIZATION_SECRET_FILE: undefined })), null, "no authorization endpoint's secret: no live issuer");
      assert.equal(stripeIssuingFor(testConfig({ ...files, STRIPE_ISSUING_WEBHOOK_SECRET_FILE: undefined })), null, "no event endpoint's secret: no live issuer");
      assert.throws(
        () => stripeIssuingFor(testConfig({ ...files, STRIPE_ISSUING_SECRET_KEY_FILE: path.join(folder, 'missing') })),
        (error: Error) => error.message.includes('STRIPE_ISSUING_SECRET_KEY_FILE') && error.message.includes('ENOENT'),
      );
      assert.throws(() => testConfig({ STRIPE_ISSUING_SECRET_KEY: 'sk_test_x', STRIPE_ISSUING_SECRET_KEY_FILE: path.join(folder, 'key') }), /not both/);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("refuses a Stripe key of the other mode (a test key for live money), naming the variables and never the key; production runs live mode only", () => {
    const secrets = { STRIPE_ISSUING_AUTHORIZATION_SECRET: 'whsec_authorization', STRIPE_ISSUING_WEBHOOK_SECRET: 'whsec_events' };
    const refusedKey = (mode: string, key: string) =>
      assert.throws(
        () => stripeIssuingFor(testConfig({ ...secrets, STRIPE_ISSUING_MODE: mode, STRIPE_ISSUING_SECRET_KEY: key })),
        (error: Error) => error.message.includes('STRIPE_ISSUING_SECRET_KEY') && error.message.includes(`STRIPE_ISSUING_MODE=${mode}`) && !error.message.includes(key),
      );
    refusedKey('live', 'sk_test_4eC39HqLyjWDarjtT1zdp7dc');
    refusedKey('live', 'rk_test_4eC39HqLyjWDarjtT1zdp7dc');
    refusedKey('test', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc');
    refusedKey('live', 'pk_live_4eC39HqLyjWDarjtT1zdp7dc');
    assert.equal(stripeIssuingFor(testConfig({ ...secrets, STRIPE_ISSUING_SECRET_KEY: 'sk_live_4eC39HqLyjWDarjtT1zdp7dc' }))?.livemode, true, 'live is the default mode');
    assert.equal(stripeIssuingFor(testConfig({ ...secrets, STRIPE_ISSUING_SECRET_KEY: 'rk_live_4eC39HqLyjWDarjtT1zdp7dc' }))?.livemode, true, 'a restricted live key');
    assert.equal(stripeIssuingFor(testConfig({ ...secrets, STRIPE_ISSUING_MODE: 'test', STRIPE_ISSUING_SECRET_KEY: 'rk_test_4eC39HqLyjWDarjtT1zdp7dc' }))?.livemode, false);
    assert.throws(() => testConfig({ NODE_ENV: 'production', MASTER_KEY: 'a'.repeat(64), STRIPE_ISSUING_MODE: 'test' }), /STRIPE_ISSUING_MODE=test is refused when NODE_ENV=production/);
  });

  it('refuses a live card with 503 card_issuer_unavailable when no issuer is configured, recording nothing', async () => {
    const bare = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: harness.taskQueue } });
    try {
      const own = await createTestOrganization('No live issuer');
      const liveKey = (await own.key(['*'], 'live')).secret;
      const customer = validCustomer();
      const refused = await bare.request('POST', '/api/cards', {
        key: liveKey,
        body: { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Ada Lovelace', customer },
      });
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.body.error.code, 'card_issuer_unavailable');
      assert.equal(refused.body.error.type, 'provider_error');
      const em = (await testOrm()).em.fork();
      assert.equal(await em.count(Card, { organization: own.organizationId }), 0);
      assert.equal(await em.count(Customer, { organization: own.organizationId }), 0);
      // The sandbox is untouched by it.
      const sandbox = await bare.request('POST', '/api/cards', { key: own.secret, body: { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Ada Lovelace', customer } });
      assert.equal(sandbox.status, 201, sandbox.text);
      // And no authorization can be decided without the issuer's secrets.
      const payload = JSON.stringify({ type: 'issuing_authorization.request' });
      const webhook = await bare.request('POST', AUTHORIZATIONS, {
        rawBody: payload,
        headers: { 'content-type': 'application/json', 'stripe-signature': signer.webhooks.generateTestHeaderString({ payload, secret: 'whsec_unused' }) },
      });
      assert.equal(webhook.status, 503, webhook.text);
      assert.equal(webhook.body.error.code, 'card_issuer_unavailable');
      // An unsigned one is bad input first, configured or not.
      const unsigned = await bare.request('POST', AUTHORIZATIONS, { rawBody: payload, headers: { 'content-type': 'application/json' } });
      assert.equal(unsigned.status, 400, unsigned.text);
      assert.equal(unsigned.body.error.code, 'invalid_signature');
    } finally {
      await bare.close();
    }
  });
});
