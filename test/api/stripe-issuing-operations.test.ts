import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Client, WorkflowFailedError } from '@temporalio/client';
import { Card } from '../../src/cards/entities';
import { cardIssuerSyncFlow } from '../../src/cards/flows/issuer-sync';
import { STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID, stripeIssuingReconciliationWorkflowType } from '../../src/cards/flows/issuer-reconciliation';
import { CardIssuerDrift } from '../../src/cards/issuer-drifts';
import { StripeIssuingKeyRefusal } from '../../src/cards/issuer-key-refusals';
import { Event } from '../../src/events/entities';
import { WorkflowStart } from '../../src/temporal/entities';
import { scheduleDefinitions } from '../../src/temporal/setup';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { missingTool } from '../support/missing-tool';
import { stripeId } from '../support/stripe-events';
import { startStripeIssuingHarness, stripeIssuingCases, type StripeIssuingHarness } from '../support/stripe-issuing';
import { needStripeMock } from '../support/stripe-mock';
import { createTestWorker } from '../support/worker';

/**
 * Stripe Issuing run over time: card syncs Stripe refuses (the card or our key), and the Schedule that compares
 * Stripe's open authorizations and Issuing balance with the cards. Every event is built from stripe-mock's
 * fixtures (test/support/stripe-events.ts); the Issuing balance from its bundled fixtures, the balance changed.
 */
describe('Stripe Issuing over time (sync refusals, reconciliation)', () => {
  let harness: StripeIssuingHarness;
  before(async () => {
    harness = await startStripeIssuingHarness('Stripe over time');
  });
  after(() => harness?.stop());

  const { liveCard, request, authorizationEvent, decision, acknowledged, reconcileIssuing } = stripeIssuingCases(() => harness);

  it("ends a card sync Stripe refuses with a state on the card and an event, not retried; the next sync Stripe takes clears it", async function () {
    this.timeout(90_000);
    needStripeMock(this, harness.stripeMock);
    const card = await liveCard(0);
    const em = (await testOrm()).em.fork();
    // A card Stripe does not know (stripe-mock answers its path 404, invalid_request_error): every update of it is refused.
    await em.nativeUpdate(Card, { id: card.id }, { issuerCardId: `${card.issuerCardId}/gone` });
    const frozen = await harness.app.request('POST', `/api/cards/${card.id}/status`, { key: harness.live, body: { status: 'frozen' } });
    assert.equal(frozen.status, 200, frozen.text);
    const [sync] = await em.find(WorkflowStart, { workflowId: { $like: `card-issuer-sync-${card.id}-%` } }, { orderBy: { createdAt: 'desc' }, limit: 1 });
    // The run ends (it would otherwise retry until the test times out).
    await (await localTemporal()).client.workflow.getHandle(sync!.workflowId).result();
    const refused = await em.fork().findOneOrFail(Card, { id: card.id });
    assert.match(refused.issuerSyncFailure ?? '', /^Stripe refused the card's update: Unrecognized request URL/);
    assert.ok(refused.issuerSyncFailedAt);
    const announced = await em.fork().find(Event, { organization: harness.org.organizationId, type: 'card.issuer_sync_failed' });
    assert.deepEqual(
      announced.map((event) => (event.data as { card_id: string; status: string }).card_id + ':' + (event.data as { status: string }).status),
      [`${card.id}:frozen`],
    );

    await em.nativeUpdate(Card, { id: card.id }, { issuerCardId: card.issuerCardId });
    const unfrozen = await harness.app.request('POST', `/api/cards/${card.id}/status`, { key: harness.live, body: { status: 'active' } });
    assert.equal(unfrozen.status, 200, unfrozen.text);
    await eventually(async () => ((await em.fork().findOneOrFail(Card, { id: card.id })).issuerSyncFailedAt === null ? true : undefined), 'the refusal to be cleared');
  });

  /** What `run` starts, run by a worker of its own whose Stripe is `stripe` (its key and address). */
  const throughWorker = async <T>(stripe: Record<string, string>, run: (taskQueue: string, client: Client) => Promise<T>): Promise<T> => {
    const taskQueue = `stripe-refused-key-${randomUUID()}`;
    const { worker } = await createTestWorker(await localTemporal(), taskQueue, stripe);
    const running = worker.run();
    try {
      return await run(taskQueue, (await localTemporal()).client);
    } finally {
      worker.shutdown();
      await running;
    }
  };

  /**
   * Syncs the card through a worker of its own whose Stripe is `stripe` (its key and address), then checks that the sync
   * ended with the card's refusal state, announced once, and that the permission is counted for the operator.
   */
  const refusedSync = async (card: Card, stripe: Record<string, string>, permission: string) => {
    // Ends (a retried sync would run until the test times out).
    await throughWorker(stripe, async (taskQueue, client) =>
      client.workflow.execute(cardIssuerSyncFlow.workflowType, { taskQueue, workflowId: `test-refused-key-${card.id}`, args: [{ cardId: card.id, change: randomUUID() }] }),
    );
    const em = (await testOrm()).em.fork();
    const { issuerSyncFailure } = await em.findOneOrFail(Card, { id: card.id });
    const [announced, ...more] = await em.find(Event, { organization: harness.org.organizationId, type: 'card.issuer_sync_failed', data: { card_id: card.id } });
    assert.deepEqual([more.length, (announced?.data as { failure_reason: string }).failure_reason], [0, issuerSyncFailure]);
    const [counted] = await em.find(StripeIssuingKeyRefusal, { permission });
    assert.deepEqual([counted?.lastOperation, counted && counted.refusals >= 1], ["card's update", true]);
    const metric = new RegExp(`^stripe_issuing_key_refusals_total\\{permission="${permission}"\\} [1-9]`, 'm');
    assert.match((await harness.app.request('GET', '/metrics')).text, metric);
    return issuerSyncFailure;
  };

  it("ends a card sync Stripe refuses for our key with the card's refusal state, never retried, and counts the refusal for the operator", async function () {
    this.timeout(90_000);
    const mock = needStripeMock(this, harness.stripeMock);
    const card = await liveCard(0);
    // A key Stripe does not take: stripe-mock answers it 401 (its message quotes the key), as Stripe does.
    const refusedKey = 'rk_test_not_taken';
    const failure = await refusedSync(card, { ...mock.config, STRIPE_ISSUING_SECRET_KEY: refusedKey }, 'authentication');
    assert.equal(failure, "Stripe refused the key for the card's update: not a key Stripe takes (401)");
  });

  it('names the permission a restricted key lacks, as Stripe\'s 403 names it', async function () {
    this.timeout(90_000);
    const mock = needStripeMock(this, harness.stripeMock);
    const card = await liveCard(0);
    // stripe-mock never answers 403 (any key that looks like one is taken): this stand-in answers every call as Stripe
    // answers a restricted key without the permission (status, type and message as Stripe sends them).
    const stripe = createServer((_request, response) => {
      response.writeHead(403, { 'content-type': 'application/json', 'request-id': 'req_restricted' });
      response.end(
        JSON.stringify({
          error: {
            message:
              "The provided key 'rk_test_*********************************************************************************************Ab12Cd' does not have the required permissions for this endpoint on account 'acct_1Test'. Having the 'rak_issuing_card_write' permission would allow this request to continue.",
            type: 'invalid_request_error',
          },
        }),
      );
    });
    await new Promise<void>((resolve) => stripe.listen(0, '127.0.0.1', resolve));
    try {
      const address = { ...mock.config, STRIPE_API_PORT: String((stripe.address() as AddressInfo).port) };
      const failure = await refusedSync(card, address, 'rak_issuing_card_write');
      assert.equal(failure, "Stripe refused the key for the card's update: it lacks the permission rak_issuing_card_write");
    } finally {
      stripe.close();
    }
  });

  it('ends a reconciliation pass Stripe refuses for our key, counted, rather than retrying it until the next tick', async function () {
    this.timeout(90_000);
    const mock = needStripeMock(this, harness.stripeMock);
    const stripe = { ...mock.config, STRIPE_ISSUING_SECRET_KEY: 'rk_test_not_taken' };
    const failure = await throughWorker(stripe, (taskQueue, client) =>
      client.workflow
        .execute(stripeIssuingReconciliationWorkflowType, { taskQueue, workflowId: `test-issuing-reconciliation-${randomUUID()}`, args: [{ organizationId: harness.org.organizationId }] })
        .then(() => null, (error: unknown) => error),
    );
    assert.ok(failure instanceof WorkflowFailedError, String(failure));
    const messages: string[] = [];
    for (let cause: unknown = failure; cause instanceof Error; cause = cause.cause) messages.push(cause.message);
    assert.ok(messages.includes('Stripe refused the key for the reconciliation: not a key Stripe takes (401)'), messages.join(' / '));
    const counted = await (await testOrm()).em.fork().findOneOrFail(StripeIssuingKeyRefusal, { permission: 'authentication' });
    assert.equal(counted.lastOperation, 'reconciliation');
  });

  it('reconciles Stripe Issuing with the cards on a Schedule: an authorization Stripe no longer holds is a drift, announced once, resolved once they agree', async function () {
    this.timeout(90_000);
    needStripeMock(this, harness.stripeMock);
    const schedule = scheduleDefinitions(testConfig(harness.config)).find((definition) => definition.scheduleId === STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID);
    assert.equal(schedule?.action.workflowType, stripeIssuingReconciliationWorkflowType);
    assert.ok(!scheduleDefinitions(testConfig({ STRIPE_ISSUING_SECRET_KEY: undefined })).some((definition) => definition.scheduleId === STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID), 'no Stripe, no reconciliation');

    const card = await liveCard(1_000);
    const id = stripeId('iauth');
    assert.equal(await decision(await request(card, id, 250)), true);
    const reconcile = () => reconcileIssuing({ organizationId: harness.org.organizationId });
    const drifts = async () => (await testOrm()).em.fork().find(CardIssuerDrift, { organization: harness.org.organizationId, subject: 'authorization', subjectId: id }, { orderBy: { firstSeenAt: 'asc' } });
    const announced = async () =>
      (await (await testOrm()).em.fork().find(Event, { organization: harness.org.organizationId, type: 'card_issuer.drift' })).filter((event) => (event.data as { authorization_id: string }).authorization_id === id);

    // stripe-mock lists only its own fixture (on a card that is not ours) as pending: Stripe holds nothing for the 250 we charged.
    await reconcile();
    await reconcile();
    assert.deepEqual((await drifts()).map((drift) => [drift.status, drift.ourAmount, drift.issuerAmount, drift.card?.id]), [['open', '250', '0', card.id]]);
    const events = await announced();
    assert.equal(events.length, 1, 'announced once, however many passes see it');
    assert.deepEqual((events[0]!.data as { our_amount: string; issuer_amount: string; difference: string }).difference, '-250');
    const metrics = await harness.app.request('GET', '/metrics');
    assert.match(metrics.text, /^stripe_issuing_drifts\{subject="authorization"\} [1-9]/m);

    // The reversal we had missed arrives: the card is charged nothing for it, as Stripe holds nothing.
    await acknowledged(await authorizationEvent(card, id, { status: 'reversed', amount: 0, decided: [250] }));
    await reconcile();
    assert.deepEqual((await drifts()).map((drift) => drift.status), ['resolved']);
  });

  // Last in this file: a pass of the whole platform also judges every other authorization its organization's earlier tests left.
  it("compares Stripe's Issuing balance with what the live cards may spend: Stripe short of it is a drift, counted, resolved once Stripe holds enough", async function () {
    this.timeout(90_000);
    const mock = needStripeMock(this, harness.stripeMock);
    const serveIssuingBalance = mock.serveIssuingBalance ?? missingTool(this, "stripe-mock's bundled fixtures not installed (scripts/ensure-tools.sh keeps them in .tools/stripe-mock/openapi)");
    await liveCard(1_000);
    const balanceDrifts = async () => (await testOrm()).em.fork().find(CardIssuerDrift, { subject: 'issuing_balance', subjectId: 'usd' }, { orderBy: { firstSeenAt: 'asc' } });
    const openBalanceDrifts = /^stripe_issuing_drifts\{subject="issuing_balance"\} (\d+)$/m;

    // Stripe's Issuing balance holds one cent: the purchases our cards may still approve could not be paid.
    await serveIssuingBalance(1);
    // The platform's balance is compared only by a pass of the whole platform, as the Schedule runs it.
    await reconcileIssuing({});
    await reconcileIssuing({});
    const [drift, ...more] = await balanceDrifts();
    assert.deepEqual([more.length, drift?.status, drift?.issuerAmount, drift?.organization ?? null], [0, 'open', '1', null], 'one open drift, however many passes see it');
    assert.ok(BigInt(drift!.ourAmount) >= 1_000n, `our cards may spend ${drift!.ourAmount}, this test's card 1000 of it`);
    assert.equal((await harness.app.request('GET', '/metrics')).text.match(openBalanceDrifts)?.[1], '1');

    // Funded to exactly what the cards may spend: Stripe can pay every purchase we would approve.
    await serveIssuingBalance(Number(drift!.ourAmount));
    await reconcileIssuing({});
    assert.deepEqual((await balanceDrifts()).map((seen) => [seen.id, seen.status]), [[drift!.id, 'resolved']]);
    assert.equal((await harness.app.request('GET', '/metrics')).text.match(openBalanceDrifts)?.[1], undefined);
  });
});
