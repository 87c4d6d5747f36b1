import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { Delivery, DeliveryAttempt, Event, WebhookEndpoint } from '../../src/events/entities';
import { webhookDeliveryFlow } from '../../src/events/flows/delivery';
import type { DestinationResolver } from '../../src/events/destinations';
import { generateSigningSecret, newSigningSecrets, rotateSigningSecrets } from '../../src/events/secrets';
import { emit } from '../../src/events/service';
import { IdempotencyService } from '../../src/idempotency/service';
import { keyProviderFor } from '../../src/keys/provider';
import { createLogger } from '../../src/logger';
import { Organization } from '../../src/organizations/entities';
import { WorkflowStart } from '../../src/temporal/entities';
import { WorkflowStarter } from '../../src/temporal/starter';
import { createWorker, workflowBundle } from '../../src/worker-setup';
import { workflowStartSweepWorkflow } from '../../workflows';
import { eventually } from '../support/eventually';
import { createTestOrganization } from '../support/app';
import { testConfig, testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { WebhookReceiver } from '../support/webhook-receiver';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/**
 * Every worker of this file runs without a workflow cache. The tests share one time-skipping server, and a test's
 * worker stops with deliveries still scheduled (a 24 h schedule, a held delivery): with a cache, their next task would
 * go to the stopped worker's sticky queue, which no one polls, and hold the server's clock for the tests after it.
 */
const NO_CACHE = 0;

describe('Webhook delivery workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;
  let receiver: WebhookReceiver;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);
  beforeEach(async () => {
    receiver = await new WebhookReceiver().start();
  });
  afterEach(() => receiver.close());

  async function createEndpoint(organizationId: string, options: { maxAttempts?: number } = {}) {
    const em = (await testOrm()).em.fork();
    const { secrets, plaintext } = await newSigningSecrets(keyProviderFor(testConfig()), organizationId);
    const endpoint = em.create(WebhookEndpoint, {
      organization: em.getReference(Organization, organizationId),
      environment: 'sandbox',
      name: 'Receiver',
      url: receiver.url,
      apiVersion: '2026-05-15',
      maxAttempts: options.maxAttempts ?? null,
      secrets,
    });
    await em.flush();
    receiver.secrets = [plaintext];
    return { endpoint, secret: plaintext };
  }

  /** Emits in a committed transaction and returns the new delivery ids (not yet dispatched). */
  async function emitCommitted(organizationId: string, data: Record<string, unknown> = { transaction_id: 'tx_1' }): Promise<string[]> {
    const em = (await testOrm()).em.fork();
    const { deliveries } = await em.transactional((tx) => emit(tx, { organizationId, environment: 'sandbox', type: 'transfer.success', data }));
    return deliveries.map((delivery) => delivery.id);
  }

  const deliveryWorkflowId = (deliveryId: string, run: number) => webhookDeliveryFlow.workflowId({ deliveryId, run, maxAttempts: null });

  /** Fires the delivery's recorded start, as the starter does after its transaction commits. */
  async function fire(taskQueue: string, deliveryId: string) {
    const starter = new WorkflowStarter(env.client, testConfig({ TEMPORAL_TASK_QUEUE: taskQueue, ...NO_SEARCH_ATTRIBUTES }), createLogger('silent'));
    const em = (await testOrm()).em.fork();
    await starter.ensureStarted(em, deliveryWorkflowId(deliveryId, 1));
    assert.ok((await em.fork().findOneOrFail(WorkflowStart, { workflowId: deliveryWorkflowId(deliveryId, 1) })).startedAt);
  }

  async function dispatchAndWait(taskQueue: string, deliveryId: string) {
    await fire(taskQueue, deliveryId);
    const handle = env.client.workflow.getHandle(deliveryWorkflowId(deliveryId, 1));
    return { handle, result: await handle.result() };
  }

  async function loadDelivery(id: string) {
    const em = (await testOrm()).em.fork();
    const delivery = await em.findOneOrFail(Delivery, { id });
    const attempts = await em.find(DeliveryAttempt, { delivery: id }, { orderBy: { run: 'asc', attempt: 'asc' } });
    return { delivery, attempts };
  }

  it('delivers on the first try a signed Standard Webhooks payload', async () => {
    const org = await createTestOrganization();
    await createEndpoint(org.organizationId);
    const [deliveryId] = await emitCommitted(org.organizationId);
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES, NO_CACHE);
    const { result } = await worker.runUntil(dispatchAndWait(taskQueue, deliveryId!));

    assert.deepEqual(result, { outcome: 'delivered', attempts: 1 });
    assert.equal(receiver.attempts.length, 1);
    const [received] = receiver.attempts;
    assert.deepEqual(received!.verifiedWith, [true]);
    const payload = JSON.parse(received!.body);
    const { delivery, attempts } = await loadDelivery(deliveryId!);
    assert.equal(received!.headers['webhook-id'], payload.event_id);
    assert.equal(payload.type, 'transfer.success');
    assert.equal(payload.api_version, '2026-05-15');
    assert.deepEqual(payload.data, { transaction_id: 'tx_1' });
    assert.equal(delivery.status, 'delivered');
    assert.equal(delivery.attempts, 1);
    assert.equal(delivery.lastHttpStatus, 200);
    assert.ok(delivery.deliveredAt);
    assert.equal(delivery.nextRetryAt, null);
    assert.equal(attempts.length, 1);
  });

  it('retries at once, then after a minute, and succeeds on the third attempt with the same webhook-id', async () => {
    const org = await createTestOrganization();
    await createEndpoint(org.organizationId);
    receiver.respondWith(500, 503, 200);
    const [deliveryId] = await emitCommitted(org.organizationId);
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES, NO_CACHE);
    const { result } = await worker.runUntil(dispatchAndWait(taskQueue, deliveryId!));

    assert.deepEqual(result, { outcome: 'delivered', attempts: 3 });
    assert.equal(receiver.attempts.length, 3);
    assert.equal(new Set(receiver.attempts.map((attempt) => attempt.headers['webhook-id'])).size, 1);
    assert.ok(receiver.attempts.every((attempt) => attempt.verifiedWith[0]));
    const { delivery, attempts } = await loadDelivery(deliveryId!);
    assert.equal(delivery.status, 'delivered');
    assert.equal(delivery.attempts, 3);
    assert.equal(delivery.lastHttpStatus, 200);
    assert.equal(delivery.errorMessage, 'destination answered HTTP 503');
    assert.deepEqual(attempts.map((attempt) => attempt.httpStatus), [500, 503, 200]);
    const t0 = attempts[0]!.attemptedAt.getTime();
    assert.ok(attempts[1]!.attemptedAt.getTime() - t0 < 5000, 'immediate retry');
    assert.ok(Math.abs(attempts[2]!.attemptedAt.getTime() - t0 - MINUTE) < 5000, 'then about a minute later');
  });

  it('walks an always-failing destination through the 24 h schedule, then marks it failed', async () => {
    const org = await createTestOrganization();
    await createEndpoint(org.organizationId);
    receiver.fallbackStatus = 500;
    const [deliveryId] = await emitCommitted(org.organizationId);
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES, NO_CACHE);
    const { handle, result } = await worker.runUntil(dispatchAndWait(taskQueue, deliveryId!));

    // Offsets from the first attempt: 0, immediate, +1 min, +5, +15, +1 h, +2 h, +4 h, +8 h, +8 h; the next would pass 24 h.
    const expected = [0, 0, 1, 6, 21, 81, 201, 441, 921, 1401].map((minutes) => minutes * MINUTE);
    assert.deepEqual(result, { outcome: 'failed', attempts: expected.length });
    const { delivery, attempts } = await loadDelivery(deliveryId!);
    const t0 = attempts[0]!.attemptedAt.getTime();
    attempts.forEach((attempt, index) => {
      assert.equal(attempt.attempt, index + 1);
      const offset = attempt.attemptedAt.getTime() - t0;
      assert.ok(Math.abs(offset - expected[index]!) < 10_000, `attempt ${index + 1} at +${offset / MINUTE} min, expected +${expected[index]! / MINUTE}`);
    });
    assert.ok(attempts.at(-1)!.attemptedAt.getTime() - t0 < 24 * HOUR);
    assert.equal(receiver.attempts.length, expected.length);
    assert.equal(delivery.status, 'failed');
    assert.equal(delivery.attempts, expected.length);
    assert.equal(delivery.lastHttpStatus, 500);
    assert.equal(delivery.nextRetryAt, null);
    assert.equal(delivery.deliveredAt, null);
    await recordHistoryIfAsked(handle, 'webhook-delivery');
  });

  it('stops at max_attempts when the endpoint sets a ceiling', async () => {
    const org = await createTestOrganization();
    await createEndpoint(org.organizationId, { maxAttempts: 3 });
    receiver.fallbackStatus = 502;
    const [deliveryId] = await emitCommitted(org.organizationId);
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES, NO_CACHE);
    const { result } = await worker.runUntil(dispatchAndWait(taskQueue, deliveryId!));
    assert.deepEqual(result, { outcome: 'failed', attempts: 3 });
    assert.equal((await loadDelivery(deliveryId!)).delivery.maxAttempts, 3);
  });

  it('disables the endpoint on 410 Gone and stops retrying', async () => {
    const org = await createTestOrganization();
    const { endpoint } = await createEndpoint(org.organizationId);
    receiver.respondWith(410);
    const [deliveryId] = await emitCommitted(org.organizationId);
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES, NO_CACHE);
    const { result } = await worker.runUntil(dispatchAndWait(taskQueue, deliveryId!));

    assert.deepEqual(result, { outcome: 'gone', attempts: 1 });
    assert.equal(receiver.attempts.length, 1);
    const { delivery } = await loadDelivery(deliveryId!);
    assert.equal(delivery.status, 'failed');
    assert.equal(delivery.lastHttpStatus, 410);
    const stored = await (await testOrm()).em.fork().findOneOrFail(WebhookEndpoint, { id: endpoint.id });
    assert.equal(stored.status, 'disabled');
    assert.match(stored.disabledReason!, /410/);
    assert.deepEqual(await emitCommitted(org.organizationId), [], 'a disabled endpoint receives no new events');
  });

  it('signs with the old and the new secret during a rotation', async () => {
    const org = await createTestOrganization();
    const { endpoint, secret: oldSecret } = await createEndpoint(org.organizationId);
    const em = (await testOrm()).em.fork();
    const stored = await em.findOneOrFail(WebhookEndpoint, { id: endpoint.id });
    const newSecret = await rotateSigningSecrets(keyProviderFor(testConfig()), org.organizationId, stored.secrets, 24);
    await em.flush();
    receiver.secrets = [oldSecret, newSecret];
    const [deliveryId] = await emitCommitted(org.organizationId);
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES, NO_CACHE);
    await worker.runUntil(dispatchAndWait(taskQueue, deliveryId!));

    assert.deepEqual(receiver.attempts[0]!.verifiedWith, [true, true]);
    assert.equal(receiver.attempts[0]!.headers['webhook-signature']!.split(' ').length, 2);
  });

  it('resumes the schedule on another worker after the first one stops, without repeating an attempt number', async () => {
    const org = await createTestOrganization();
    await createEndpoint(org.organizationId);
    receiver.respondWith(500, 500, 500, 200);
    const [deliveryId] = await emitCommitted(org.organizationId);
    const first = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES, NO_CACHE);

    // Worker 1 makes the first two attempts, then dies while the workflow waits on its 1-minute timer.
    await first.worker.runUntil(async () => {
      await fire(first.taskQueue, deliveryId!);
      await eventually(async () => {
        const { delivery } = await loadDelivery(deliveryId!);
        return delivery.attempts === 2 && delivery.nextRetryAt ? delivery : undefined;
      }, 'two attempts and a scheduled retry');
    });
    assert.equal(receiver.attempts.length, 2);

    const second = await createTestWorker(env, first.taskQueue, NO_SEARCH_ATTRIBUTES, NO_CACHE);
    const result = await second.worker.runUntil(env.client.workflow.getHandle(deliveryWorkflowId(deliveryId!, 1)).result());
    assert.deepEqual(result, { outcome: 'delivered', attempts: 4 });
    const { delivery, attempts } = await loadDelivery(deliveryId!);
    assert.deepEqual(attempts.map((attempt) => attempt.attempt), [1, 2, 3, 4]);
    assert.equal(delivery.attempts, 4);
    assert.equal(receiver.attempts.length, 4);
  });

  it('never delivers an event whose transaction rolled back; the sweep starts committed ones', async () => {
    const org = await createTestOrganization();
    await createEndpoint(org.organizationId);
    const em = (await testOrm()).em.fork();
    await assert.rejects(
      em.transactional(async (tx) => {
        await emit(tx, { organizationId: org.organizationId, environment: 'sandbox', type: 'transfer.success', data: { transaction_id: 'rolled_back' } });
        await tx.flush();
        throw new Error('the state change failed');
      }),
      /state change failed/,
    );
    assert.equal(await em.fork().count(Event, { organization: org.organizationId }), 0);
    assert.equal(await em.fork().count(Delivery, { organization: org.organizationId }), 0);

    // Committed but never started after commit (as if the process died): the start sweep fires it, once.
    const [deliveryId] = await emitCommitted(org.organizationId, { transaction_id: 'committed' });
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES, NO_CACHE);
    await worker.runUntil(async () => {
      const sweep = (run: number) =>
        env.client.workflow.execute(workflowStartSweepWorkflow, {
          taskQueue,
          workflowId: `sweep-${deliveryId}-${run}`,
          args: [{ graceSeconds: 0, organizationId: org.organizationId }],
        });
      assert.deepEqual(await sweep(1), { started: 1 });
      await env.client.workflow.getHandle(deliveryWorkflowId(deliveryId!, 1)).result();
      assert.deepEqual(await sweep(2), { started: 0 }, 'a fired start is not fired again');
    });
    assert.equal(receiver.attempts.length, 1);
    assert.equal(JSON.parse(receiver.attempts[0]!.body).data.transaction_id, 'committed');
  });

  it("delivers to an explicit destination such as a card's webhook_url through the resolver the worker was given", async () => {
    const org = await createTestOrganization();
    const secret = generateSigningSecret();
    receiver.secrets = [secret];
    const card: DestinationResolver = {
      resolve: async (_em, config, _organizationId, id) => ({
        url: receiver.url,
        secrets: [secret],
        apiVersion: '2026-01-30',
        policy: { environment: 'sandbox', allowInsecureLoopback: config.WEBHOOK_ALLOW_INSECURE_LOOPBACK },
        inactiveReason: id === 'card_1' ? null : 'card terminated',
      }),
      markGone: async () => undefined,
    };
    const em = (await testOrm()).em.fork();
    const { deliveries } = await em.transactional((tx) =>
      emit(tx, { organizationId: org.organizationId, environment: 'sandbox', type: 'card.ready', data: { card_id: 'card_1' }, destinations: [{ kind: 'card', id: 'card_1', url: receiver.url }] }),
    );
    assert.equal(deliveries.length, 1, 'no endpoint of this organization, only the card');
    // This worker alone gets the test resolver: nothing global is replaced.
    const taskQueue = `test-${randomUUID()}`;
    const config = testConfig({ TEMPORAL_TASK_QUEUE: taskQueue, ...NO_SEARCH_ATTRIBUTES });
    const worker = await createWorker({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      deps: {
        config,
        orm: await testOrm(),
        log: createLogger('silent'),
        idempotency: new IdempotencyService(config.IDEMPOTENCY_LOCK_SECONDS),
        destinationResolvers: { card },
      },
    });
    const { result } = await worker.runUntil(dispatchAndWait(taskQueue, deliveries[0]!.id));

    assert.deepEqual(result, { outcome: 'delivered', attempts: 1 });
    assert.deepEqual(receiver.attempts[0]!.verifiedWith, [true]);
    const payload = JSON.parse(receiver.attempts[0]!.body);
    assert.equal(payload.event_id, undefined, 'payloads before 2026-05-15 carry no event_id');
    assert.equal(payload.api_version, '2026-01-30');
    assert.equal((await loadDelivery(deliveries[0]!.id)).delivery.destinationId, 'card_1');
  });

  describe("an endpoint's circuit", () => {
    const circuitConfig = { ...NO_SEARCH_ATTRIBUTES, WEBHOOK_CIRCUIT_FAILURES: '2' };
    const receivedData = (from: WebhookReceiver) => from.attempts.map((attempt) => ({ status: attempt.status, data: JSON.parse(attempt.body).data }));

    it('pauses the deliveries of a failing endpoint behind one probe, and resumes them all when it succeeds', async () => {
      const org = await createTestOrganization();
      const { endpoint } = await createEndpoint(org.organizationId);
      receiver.fallbackStatus = 500;
      const { worker, taskQueue } = await createTestWorker(env, undefined, circuitConfig, NO_CACHE);
      await worker.runUntil(async () => {
        // Two failures of a first delivery open the circuit.
        const [first] = await emitCommitted(org.organizationId, { n: 1 });
        await fire(taskQueue, first!);
        await eventually(async () => ((await loadDelivery(first!)).delivery.attempts === 2 ? true : undefined), 'two failed attempts');
        // Emitted before any probe was claimed, so not held: the first to ask becomes the probe and attempts, the others send nothing.
        const [probe] = await emitCommitted(org.organizationId, { n: 2 });
        const waiting = [...(await emitCommitted(org.organizationId, { n: 3 })), ...(await emitCommitted(org.organizationId, { n: 4 }))];
        await fire(taskQueue, probe!);
        await eventually(async () => ((await loadDelivery(probe!)).delivery.attempts >= 1 ? true : undefined), 'the probe attempted');
        for (const id of waiting) await fire(taskQueue, id);
        for (const id of waiting) {
          await eventually(async () => ((await loadDelivery(id)).delivery.errorMessage?.includes('paused') ? true : undefined), 'paused');
        }
        const stored = await (await testOrm()).em.fork().findOneOrFail(WebhookEndpoint, { id: endpoint.id });
        assert.equal(stored.probeDeliveryId, probe);
        assert.ok(!receivedData(receiver).some((attempt) => attempt.data.n >= 3), 'paused deliveries send nothing');

        // The endpoint answers again: the probe's next attempt succeeds and every paused delivery is delivered at once.
        receiver.fallbackStatus = 200;
        for (const id of [first!, probe!, ...waiting]) {
          assert.equal((await env.client.workflow.getHandle(deliveryWorkflowId(id, 1)).result()).outcome, 'delivered');
        }
        for (const id of waiting) {
          const { delivery, attempts } = await loadDelivery(id);
          assert.equal(delivery.status, 'delivered');
          assert.deepEqual(attempts.map((attempt) => [attempt.attempt, attempt.httpStatus]), [[1, 200]], 'one attempt, after the probe succeeded');
        }
      });
      const healed = await (await testOrm()).em.fork().findOneOrFail(WebhookEndpoint, { id: endpoint.id });
      assert.equal(healed.consecutiveFailures, 0);
      assert.equal(healed.failingSince, null);
      assert.equal(healed.probeDeliveryId, null);
    });

    /** Two failed attempts of event 1 open the circuit; event 2's delivery becomes its probe (returned). */
    async function openCircuitWithProbe(organizationId: string, endpointId: string, taskQueue: string): Promise<string> {
      const [first] = await emitCommitted(organizationId, { n: 1 });
      await fire(taskQueue, first!);
      await eventually(async () => ((await loadDelivery(first!)).delivery.attempts === 2 ? true : undefined), 'two failed attempts open the circuit');
      const [probe] = await emitCommitted(organizationId, { n: 2 });
      await fire(taskQueue, probe!);
      await eventually(
        async () => ((await (await testOrm()).em.fork().findOneOrFail(WebhookEndpoint, { id: endpointId })).probeDeliveryId === probe ? true : undefined),
        'the second delivery probes the endpoint',
      );
      return probe!;
    }

    it('holds the deliveries emitted while the circuit is open without a workflow, and starts each once when the probe succeeds', async () => {
      const org = await createTestOrganization();
      const { endpoint } = await createEndpoint(org.organizationId);
      receiver.fallbackStatus = 500;
      const { worker, taskQueue } = await createTestWorker(env, undefined, circuitConfig, NO_CACHE);
      await worker.runUntil(async () => {
        const probe = await openCircuitWithProbe(org.organizationId, endpoint.id, taskQueue);

        // Behind the open circuit: pending, held, and no workflow start recorded.
        const held: string[] = [];
        for (let n = 3; n <= 7; n += 1) held.push(...(await emitCommitted(org.organizationId, { n })));
        assert.equal(held.length, 5);
        for (const id of held) {
          const { delivery } = await loadDelivery(id);
          assert.equal(delivery.status, 'pending');
          assert.equal(delivery.heldByCircuit, true);
        }
        assert.equal(await (await testOrm()).em.fork().count(WorkflowStart, { resourceType: 'event_delivery', resourceId: { $in: held } }), 0);

        // The endpoint answers again: the probe's success starts every held delivery, each delivered once.
        receiver.fallbackStatus = 200;
        assert.equal((await env.client.workflow.getHandle(deliveryWorkflowId(probe, 1)).result()).outcome, 'delivered');
        for (const id of held) {
          await eventually(
            async () => ((await (await testOrm()).em.fork().findOne(WorkflowStart, { workflowId: deliveryWorkflowId(id, 1) }))?.startedAt ? true : undefined),
            'the held delivery is started',
          );
          assert.equal((await env.client.workflow.getHandle(deliveryWorkflowId(id, 1)).result()).outcome, 'delivered');
          const { delivery, attempts } = await loadDelivery(id);
          assert.equal(delivery.heldByCircuit, false);
          assert.deepEqual(attempts.map((attempt) => [attempt.attempt, attempt.httpStatus]), [[1, 200]]);
        }
      });
      for (let n = 3; n <= 7; n += 1) {
        assert.deepEqual(receivedData(receiver).filter((attempt) => attempt.data.n === n), [{ status: 200, data: { n } }], `event ${n} delivered exactly once`);
      }
    });

    it('hands the probe to the oldest held delivery when the probe run ends without success', async () => {
      const org = await createTestOrganization();
      const { endpoint } = await createEndpoint(org.organizationId, { maxAttempts: 3 });
      receiver.fallbackStatus = 500;
      const { worker, taskQueue } = await createTestWorker(env, undefined, circuitConfig, NO_CACHE);
      await worker.runUntil(async () => {
        const probe = await openCircuitWithProbe(org.organizationId, endpoint.id, taskQueue);
        const [next] = await emitCommitted(org.organizationId, { n: 3 });
        const [later] = await emitCommitted(org.organizationId, { n: 4 });
        assert.equal((await loadDelivery(next!)).delivery.heldByCircuit, true);

        // The probe gives up after its 3 attempts: the oldest held delivery takes over, the later one stays held.
        assert.equal((await env.client.workflow.getHandle(deliveryWorkflowId(probe, 1)).result()).outcome, 'failed');
        const stored = await (await testOrm()).em.fork().findOneOrFail(WebhookEndpoint, { id: endpoint.id });
        assert.equal(stored.probeDeliveryId, next);
        assert.equal((await loadDelivery(next!)).delivery.heldByCircuit, false);
        assert.equal((await loadDelivery(later!)).delivery.heldByCircuit, true);
        receiver.fallbackStatus = 200;
        await eventually(
          async () => ((await (await testOrm()).em.fork().findOne(WorkflowStart, { workflowId: deliveryWorkflowId(next!, 1) }))?.startedAt ? true : undefined),
          'the new probe is started',
        );
        assert.equal((await env.client.workflow.getHandle(deliveryWorkflowId(next!, 1)).result()).outcome, 'delivered');
        await eventually(
          async () => ((await (await testOrm()).em.fork().findOne(WorkflowStart, { workflowId: deliveryWorkflowId(later!, 1) }))?.startedAt ? true : undefined),
          'its success starts the later one',
        );
        assert.equal((await env.client.workflow.getHandle(deliveryWorkflowId(later!, 1)).result()).outcome, 'delivered');
      });
    });

    it('disables an endpoint failing for longer than WEBHOOK_DISABLE_AFTER_HOURS and tells the other endpoints, not it', async () => {
      const org = await createTestOrganization();
      const { endpoint: dead } = await createEndpoint(org.organizationId);
      receiver.fallbackStatus = 500;
      const healthy = await new WebhookReceiver().start();
      try {
        const em = (await testOrm()).em.fork();
        const { secrets, plaintext } = await newSigningSecrets(keyProviderFor(testConfig()), org.organizationId);
        const other = em.create(WebhookEndpoint, {
          organization: em.getReference(Organization, org.organizationId),
          environment: 'sandbox',
          name: 'Healthy',
          url: healthy.url,
          apiVersion: '2026-05-15',
          secrets,
        });
        await em.flush();
        healthy.secrets = [plaintext];
        const { worker, taskQueue } = await createTestWorker(env, undefined, { ...NO_SEARCH_ATTRIBUTES, WEBHOOK_DISABLE_AFTER_HOURS: '1' }, NO_CACHE);
        const deliveryIds = await emitCommitted(org.organizationId);
        const toDead = (await Promise.all(deliveryIds.map(loadDelivery))).find(({ delivery }) => delivery.destinationId === dead.id)!.delivery.id;
        const result = await worker.runUntil(async () => {
          for (const id of deliveryIds) await fire(taskQueue, id);
          const outcome = await env.client.workflow.getHandle(deliveryWorkflowId(toDead, 1)).result();
          await eventually(async () => (healthy.attempts.length === 2 ? true : undefined), 'the healthy endpoint hears of it');
          return outcome;
        });

        // Attempts at 0, 0, +1, +6, +21 min and +1 h 21: the first failure more than an hour back disables it.
        assert.deepEqual(result, { outcome: 'failed', attempts: 6 });
        const stored = await (await testOrm()).em.fork().findOneOrFail(WebhookEndpoint, { id: dead.id });
        assert.equal(stored.status, 'disabled');
        assert.match(stored.disabledReason!, /failing since .* disabled automatically/);
        const notice = healthy.attempts.map((attempt) => JSON.parse(attempt.body)).find((body) => body.type === 'webhook_endpoint.disabled');
        assert.equal(notice.data.webhook_id, dead.id);
        assert.ok(notice.data.failing_since);
        assert.ok(receiver.attempts.every((attempt) => JSON.parse(attempt.body).type !== 'webhook_endpoint.disabled'), 'never to the disabled endpoint');
        assert.equal(other.status, 'enabled');
        assert.deepEqual(await emitCommitted(org.organizationId).then((ids) => ids.length), 1, 'new events reach only the healthy endpoint');
      } finally {
        await healthy.close();
      }
    });
  });

  it('replays its recorded history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('webhook-delivery'), 'webhook-delivery');
  });
});
