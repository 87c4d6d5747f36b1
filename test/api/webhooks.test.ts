import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { Event, WebhookEndpoint } from '../../src/events/entities';
import { emit } from '../../src/events/service';
import { Organization } from '../../src/organizations/entities';
import { WorkflowStart } from '../../src/temporal/entities';
import { eventually } from '../support/eventually';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { WebhookReceiver } from '../support/webhook-receiver';
import { createTestWorker } from '../support/worker';

/** Polls GET /v1/events/:id until `done` holds (deliveries run in the worker). */
function waitForEvent(app: TestApp, key: string, id: string, done: (event: any) => boolean) {
  return eventually(async () => {
    const response = await app.request('GET', `/v1/events/${id}`, { key });
    return done(response.body) ? response.body : undefined;
  }, `event ${id} in the expected state`);
}

describe('Webhooks, subscriptions and delivery events API', () => {
  let app: TestApp;
  let org: TestOrganization;
  let receiver: WebhookReceiver;
  let worker: Worker;
  let running: Promise<void>;

  before(async () => {
    const taskQueue = `webhooks-api-${randomUUID()}`;
    app = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: taskQueue } });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue));
    running = worker.run();
    org = await createTestOrganization();
    receiver = await new WebhookReceiver().start();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await receiver?.close();
    await app?.close();
  });

  const createWebhook = (body: Record<string, unknown> = {}) =>
    app.request('POST', '/v1/webhooks', { key: org.secret, body: { name: 'Orders', url: receiver.url, ...body } });

  it('lists the event types with descriptions', async () => {
    const response = await app.request('GET', '/v1/webhooks/event-types', { key: org.secret });
    assert.equal(response.status, 200);
    const types = response.body.data.map((entry: { type: string }) => entry.type);
    for (const type of ['transaction.confirmed', 'incoming_token_tx', 'transfer.success', 'payouts.withdrawal.failed', 'webhook.test']) {
      assert.ok(types.includes(type), type);
    }
    assert.ok(response.body.data.every((entry: { description: string }) => entry.description.length > 0));
  });

  it('creates an endpoint with its secret once, then reads, updates and deletes it', async () => {
    const created = await createWebhook({ event_types: ['transfer.success'] });
    assert.equal(created.status, 201);
    assert.equal(created.body.object, 'webhook');
    assert.match(created.body.signing_secret, /^whsec_[A-Za-z0-9+/=]{40,}$/);
    assert.equal(created.body.has_signing_secret, true);
    assert.equal(created.body.status, 'enabled');
    assert.equal(created.body.api_version, '2026-05-15');
    assert.deepEqual(created.body.event_types, ['transfer.success']);
    assert.equal(created.body.max_attempts, undefined);

    const fetched = await app.request('GET', `/v1/webhooks/${created.body.id}`, { key: org.secret });
    assert.equal(fetched.status, 200);
    assert.equal(fetched.body.signing_secret, undefined);
    const listed = await app.request('GET', '/v1/webhooks', { key: org.secret });
    assert.ok(listed.body.data.some((webhook: { id: string; signing_secret?: string }) => webhook.id === created.body.id && !webhook.signing_secret));

    const updated = await app.request('PATCH', `/v1/webhooks/${created.body.id}`, {
      key: org.secret,
      body: { name: 'Renamed', event_types: [], max_attempts: 5 },
    });
    assert.equal(updated.status, 200);
    assert.equal(updated.body.name, 'Renamed');
    assert.deepEqual(updated.body.event_types, []);
    assert.equal(updated.body.max_attempts, 5);

    const rotated = await app.request('POST', `/v1/webhooks/${created.body.id}/rotate-secret`, { key: org.secret });
    assert.equal(rotated.status, 200);
    assert.equal(rotated.body.object, 'signing_secret');
    assert.notEqual(rotated.body.signing_secret, created.body.signing_secret);
    assert.ok(Date.parse(rotated.body.previous_secret_expires_at) > Date.now() + 23 * 3600_000);

    const deleted = await app.request('DELETE', `/v1/webhooks/${created.body.id}`, { key: org.secret });
    assert.deepEqual(deleted.body, { id: created.body.id, object: 'webhook', deleted: true });
    assert.equal((await app.request('GET', `/v1/webhooks/${created.body.id}`, { key: org.secret })).status, 404);
  });

  it('validates name, URL and event types; live keys need public HTTPS URLs', async () => {
    assert.equal((await createWebhook({ name: '' })).body.error.param, 'name');
    assert.equal((await createWebhook({ name: 'x'.repeat(256) })).status, 400);
    assert.equal((await createWebhook({ url: 'ftp://example.com/hook' })).body.error.param, 'url');
    assert.equal((await createWebhook({ url: 'http://10.0.0.5/hook' })).status, 400);
    const unknownType = await createWebhook({ event_types: ['no.such.type'] });
    assert.equal(unknownType.status, 400);
    assert.equal(unknownType.body.error.param, 'event_types.0');

    const live = await createTestOrganization('Live org', 'live');
    const post = (url: string) => app.request('POST', '/v1/webhooks', { key: live.secret, body: { name: 'Live', url } });
    for (const url of [receiver.url, 'https://127.0.0.1/hook', 'https://localhost/hook', 'https://192.168.1.10/hook', 'https://169.254.169.254/latest', 'https://[::1]/hook', 'https://[fd00::1]/hook']) {
      const refused = await post(url);
      assert.equal(refused.status, 400, url);
      assert.equal(refused.body.error.code, 'validation_failed');
      assert.equal(refused.body.error.param, 'url');
    }
    const accepted = await post('https://93.184.215.14/hook');
    assert.equal(accepted.status, 201, JSON.stringify(accepted.body));
  });

  it('sends a signed test event, shows it in /v1/events, and re-queues it by manual retry', async () => {
    const created = await createWebhook();
    receiver.secrets = [created.body.signing_secret];
    const queued = await app.request('POST', `/v1/webhooks/${created.body.id}/test`, { key: org.secret });
    assert.equal(queued.status, 201);
    assert.equal(queued.body.object, 'event');
    assert.equal(queued.body.delivery_status, 'pending');
    assert.equal(queued.body.webhook_id, created.body.id);

    const delivered = await waitForEvent(app, org.secret, queued.body.id, (event) => event.delivery_status === 'delivered');
    assert.equal(delivered.type, 'webhook.test');
    assert.equal(delivered.destination, receiver.url);
    assert.equal(delivered.delivery_attempts, 1);
    assert.equal(delivered.http_status_code, 200);
    assert.ok(delivered.delivered_at);
    assert.equal(delivered.next_retry_at, undefined);
    assert.equal(delivered.attempts.length, 1);
    const first = receiver.attempts.at(-1)!;
    assert.deepEqual(first.verifiedWith, [true]);
    assert.equal(JSON.parse(first.body).event_id, delivered.event_id);

    const retry = await app.request('POST', `/v1/events/${queued.body.id}/retry`, { key: org.secret });
    assert.equal(retry.status, 202);
    assert.deepEqual(retry.body, { object: 'event_retry', status: 'queued' });
    const again = await waitForEvent(app, org.secret, queued.body.id, (event) => event.delivery_attempts === 2 && event.delivery_status === 'delivered');
    assert.deepEqual(again.attempts.map((attempt: { run: number; attempt: number }) => [attempt.run, attempt.attempt]), [[1, 1], [2, 1]]);
    assert.equal(receiver.attempts.at(-1)!.headers['webhook-id'], first.headers['webhook-id']);

    const filtered = await app.request('GET', `/v1/events?webhook_id=${created.body.id}&delivery_status=delivered&type=webhook.test`, { key: org.secret });
    assert.deepEqual(filtered.body.data.map((event: { id: string }) => event.id), [queued.body.id]);

    // The receiver knows the event id only (payload event_id, webhook-id header): it reads the event by it, with its delivery.
    const byEventId = await app.request('GET', `/v1/events/${first.headers['webhook-id']}`, { key: org.secret });
    assert.equal(byEventId.status, 200, byEventId.text);
    const payload = JSON.parse(first.body);
    assert.deepEqual(
      [byEventId.body.id, byEventId.body.object, byEventId.body.type, byEventId.body.created_at, byEventId.body.data],
      [payload.event_id, 'webhook_event', payload.type, payload.created_at, payload.data],
      'the event as the receiver got it',
    );
    assert.deepEqual(byEventId.body.deliveries.map((delivery: { id: string; delivery_status: string; delivery_attempts: number }) => [delivery.id, delivery.delivery_status, delivery.delivery_attempts]), [[queued.body.id, 'delivered', 2]]);
    assert.equal(byEventId.body.deliveries[0].attempts, undefined, 'attempts are on the delivery');
    assert.equal((await app.request('POST', `/v1/events/${delivered.event_id}/retry`, { key: org.secret })).status, 202, 'an event with one delivery is retried by its id');
    const listedByEventId = await app.request('GET', `/v1/events?event_id=${delivered.event_id}`, { key: org.secret });
    assert.deepEqual(listedByEventId.body.data.map((event: { id: string }) => event.id), [queued.body.id]);
    const none = await app.request('GET', `/v1/events?webhook_id=${created.body.id}&delivery_status=failed`, { key: org.secret });
    assert.deepEqual(none.body.data, []);
  });

  it('holds test events behind an open circuit, fails them when the endpoint is disabled or deleted, and starts them when it is re-enabled', async () => {
    const created = await createWebhook();
    receiver.secrets = [created.body.signing_secret];
    const em = app.deps.orm.em.fork();
    // Opens the endpoint's circuit on a probe delivery that stays pending (its recorded start is never fired).
    const openCircuit = async () => {
      const { deliveries } = await em.fork().transactional((tx) =>
        emit(tx, { organizationId: org.organizationId, environment: 'sandbox', type: 'webhook.test', data: {}, destinations: [{ kind: 'webhook', id: created.body.id }], broadcast: false }),
      );
      await em.fork().nativeUpdate(WebhookEndpoint, { id: created.body.id }, { consecutiveFailures: 5, probeDeliveryId: deliveries[0]!.id });
    };
    const sendHeld = async (count: number) => {
      const ids: string[] = [];
      for (let i = 0; i < count; i += 1) {
        const queued = await app.request('POST', `/v1/webhooks/${created.body.id}/test`, { key: org.secret });
        assert.equal(queued.status, 201);
        assert.equal(queued.body.delivery_status, 'pending');
        ids.push(queued.body.id);
      }
      assert.equal(await em.fork().count(WorkflowStart, { resourceType: 'event_delivery', resourceId: { $in: ids } }), 0, 'no workflow start behind an open circuit');
      return ids;
    };

    await openCircuit();
    const released = await sendHeld(2);
    const reset = await app.request('PATCH', `/v1/webhooks/${created.body.id}`, { key: org.secret, body: { status: 'enabled' } });
    assert.equal(reset.status, 200);
    for (const id of released) {
      const delivered = await waitForEvent(app, org.secret, id, (event) => event.delivery_status === 'delivered');
      assert.equal(delivered.delivery_attempts, 1);
    }

    await openCircuit();
    const disabledWhileHeld = await sendHeld(2);
    assert.equal((await app.request('PATCH', `/v1/webhooks/${created.body.id}`, { key: org.secret, body: { status: 'disabled' } })).status, 200);
    for (const id of disabledWhileHeld) {
      const failed = (await app.request('GET', `/v1/events/${id}`, { key: org.secret })).body;
      assert.equal(failed.delivery_status, 'failed');
      assert.equal(failed.delivery_attempts, 0);
      assert.equal(failed.error_message, 'webhook endpoint disabled while its circuit was open; not attempted');
    }
    assert.equal((await app.request('PATCH', `/v1/webhooks/${created.body.id}`, { key: org.secret, body: { status: 'enabled' } })).status, 200);
    assert.equal((await app.request('POST', `/v1/events/${disabledWhileHeld[0]}/retry`, { key: org.secret })).status, 202);
    const retried = await waitForEvent(app, org.secret, disabledWhileHeld[0]!, (event) => event.delivery_status === 'delivered');
    assert.deepEqual(retried.attempts.map((attempt: { run: number; attempt: number }) => [attempt.run, attempt.attempt]), [[2, 1]]);

    // A manual retry of a delivery still held starts it at once, despite the circuit; its success closes the circuit and starts the other.
    await openCircuit();
    const [retriedWhileHeld, startedByItsSuccess] = await sendHeld(2);
    assert.equal((await app.request('POST', `/v1/events/${retriedWhileHeld}/retry`, { key: org.secret })).status, 202);
    for (const id of [retriedWhileHeld!, startedByItsSuccess!]) {
      assert.equal((await waitForEvent(app, org.secret, id, (event) => event.delivery_status === 'delivered')).delivery_attempts, 1);
    }

    await openCircuit();
    const [deletedWhileHeld] = await sendHeld(1);
    assert.equal((await app.request('DELETE', `/v1/webhooks/${created.body.id}`, { key: org.secret })).status, 200);
    const deleted = (await app.request('GET', `/v1/events/${deletedWhileHeld}`, { key: org.secret })).body;
    assert.equal(deleted.delivery_status, 'failed');
    assert.equal(deleted.error_message, 'webhook endpoint deleted while its circuit was open; not attempted');
  });

  it('delivers every type, the payout stages\' withdrawal.* aliases included, to an endpoint with an empty filter', async () => {
    const o = await createTestOrganization('Every type');
    const create = (body: Record<string, unknown>) => app.request('POST', '/v1/webhooks', { key: o.secret, body: { url: receiver.url, ...body } });
    const everything = (await create({ name: 'Everything' })).body;
    const named = (await create({ name: 'Stage only', event_types: ['payouts.withdrawal.success'] })).body;
    const deliveredTo = await app.deps.orm.em.fork().transactional(async (tx) => {
      const data = { tripId: `trip-${randomUUID()}` };
      const stage = await emit(tx, { organizationId: o.organizationId, environment: 'sandbox', type: 'payouts.withdrawal.success', data });
      const alias = await emit(tx, { organizationId: o.organizationId, environment: 'sandbox', type: 'withdrawal.success', data: { ...data, alias_of: 'payouts.withdrawal.success' } });
      return [stage, alias].map(({ deliveries }) => deliveries.map((delivery) => delivery.destinationId).sort());
    });
    assert.deepEqual(deliveredTo, [[everything.id, named.id].sort(), [everything.id]]);
  });

  it('answers an event id with the event and every delivery, whether it went to several destinations or none; a retry by it needs one delivery', async () => {
    const [one, two] = [(await createWebhook()).body, (await createWebhook()).body];
    const emitTo = (destinations: { kind: 'webhook'; id: string }[]) =>
      app.deps.orm.em.fork().transactional((tx) =>
        emit(tx, { organizationId: org.organizationId, environment: 'sandbox', type: 'webhook.test', data: { message: 'to each' }, destinations, broadcast: false }),
      );
    const { eventId, deliveries } = await emitTo([{ kind: 'webhook', id: one.id }, { kind: 'webhook', id: two.id }]);
    const byWebhook = (a: { webhook_id: string }, b: { webhook_id: string }) => a.webhook_id.localeCompare(b.webhook_id);

    const read = await app.request('GET', `/v1/events/${eventId}`, { key: org.secret });
    assert.equal(read.status, 200, read.text);
    assert.deepEqual([read.body.id, read.body.object, read.body.type, read.body.data], [eventId, 'webhook_event', 'webhook.test', { message: 'to each' }]);
    assert.deepEqual(
      read.body.deliveries.map((delivery: { id: string; webhook_id: string; event_id: string; object: string }) => [delivery.id, delivery.webhook_id, delivery.event_id, delivery.object]).sort((a: string[], b: string[]) => a[1]!.localeCompare(b[1]!)),
      deliveries.map((delivery) => [delivery.id, delivery.destinationId, eventId, 'event']).sort((a, b) => a[1]!.localeCompare(b[1]!)),
    );
    const listed = await app.request('GET', `/v1/events?event_id=${eventId}`, { key: org.secret });
    assert.deepEqual([...listed.body.data].sort(byWebhook), [...read.body.deliveries].sort(byWebhook), 'each delivery as the list shows it');
    for (const delivery of read.body.deliveries) {
      const alone = await app.request('GET', `/v1/events/${delivery.id}`, { key: org.secret });
      assert.deepEqual([alone.status, alone.body.object, alone.body.event_id, Array.isArray(alone.body.attempts)], [200, 'event', eventId, true], 'a delivery id answers the delivery with its attempts');
    }

    const ambiguous = await app.request('POST', `/v1/events/${eventId}/retry`, { key: org.secret });
    assert.deepEqual([ambiguous.status, ambiguous.body.error.code], [409, 'event_id_ambiguous'], ambiguous.text);
    assert.equal(ambiguous.body.error.details.event_id, eventId);
    assert.deepEqual([...ambiguous.body.error.details.deliveries].sort(byWebhook), deliveries.map((delivery) => ({ id: delivery.id, webhook_id: delivery.destinationId })).sort(byWebhook));

    // No destination matched: the event is still there, with no delivery.
    const unsent = await emitTo([]);
    const alone = await app.request('GET', `/v1/events/${unsent.eventId}`, { key: org.secret });
    assert.deepEqual([alone.status, alone.body.id, alone.body.deliveries], [200, unsent.eventId, []], alone.text);
    assert.equal((await app.request('POST', `/v1/events/${unsent.eventId}/retry`, { key: org.secret })).status, 404, 'nothing to retry');

    const onlyTwo = await app.request('GET', `/v1/events?event_id=${eventId}&webhook_id=${two.id}`, { key: org.secret });
    assert.deepEqual(onlyTwo.body.data.map((delivery: { webhook_id: string }) => delivery.webhook_id), [two.id]);
    assert.deepEqual((await app.request('GET', `/v1/events?event_id=evt_unknown`, { key: org.secret })).body.data, []);
    for (const id of ['evt_unknown', 'dlv_unknown']) assert.deepEqual([(await app.request('GET', `/v1/events/${id}`, { key: org.secret })).status], [404], id);
  });

  it('pages delivery events with a cursor', async () => {
    const created = await createWebhook();
    for (let i = 0; i < 3; i += 1) await app.request('POST', `/v1/webhooks/${created.body.id}/test`, { key: org.secret });
    const first = await app.request('GET', `/v1/events?webhook_id=${created.body.id}&limit=2`, { key: org.secret });
    assert.equal(first.body.data.length, 2);
    assert.equal(first.body.has_more, true);
    const second = await app.request('GET', `/v1/events?webhook_id=${created.body.id}&limit=2&cursor=${first.body.next_cursor}`, { key: org.secret });
    assert.equal(second.body.data.length, 1);
    assert.equal(second.body.has_more, false);
  });

  it('manages subscriptions with every specified field', async () => {
    const created = await app.request('POST', '/v1/subscriptions', {
      key: org.secret,
      body: { address: '0x52908400098527886E0F7030069857D2E4169EE7', chain: 'ethereum', webhook_url: receiver.url, event_type: 'incoming_token_tx', label: 'Treasury', metadata: { team: 'ops' }, network: 'mainnet' },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.object, 'subscription');
    assert.equal(created.body.network, 'sepolia', 'the sandbox environment decides the network');
    assert.equal(created.body.status, 'active');
    assert.equal(created.body.has_signing_secret, true);
    assert.match(created.body.signing_secret, /^whsec_/);
    assert.equal(created.body.last_event_at, null);
    assert.equal(created.body.failure_reason, undefined);
    assert.deepEqual(created.body.metadata, { team: 'ops' });

    const fetched = await app.request('GET', `/v1/subscriptions/${created.body.id}`, { key: org.secret });
    assert.equal(fetched.body.signing_secret, undefined);
    assert.equal(fetched.body.has_signing_secret, true);
    const updated = await app.request('PATCH', `/v1/subscriptions/${created.body.id}`, { key: org.secret, body: { label: null, event_type: '', status: 'disabled' } });
    assert.equal(updated.body.label, null);
    assert.equal(updated.body.event_type, '');
    assert.equal(updated.body.status, 'disabled');
    const rotated = await app.request('POST', `/v1/subscriptions/${created.body.id}/rotate-secret`, { key: org.secret });
    assert.equal(rotated.body.object, 'subscription');
    assert.match(rotated.body.signing_secret, /^whsec_/);
    assert.notEqual(rotated.body.signing_secret, created.body.signing_secret);
    const listed = await app.request('GET', '/v1/subscriptions', { key: org.secret });
    assert.ok(listed.body.data.some((subscription: { id: string }) => subscription.id === created.body.id));
    assert.equal((await app.request('DELETE', `/v1/subscriptions/${created.body.id}`, { key: org.secret })).body.deleted, true);
    assert.equal((await app.request('GET', `/v1/subscriptions/${created.body.id}`, { key: org.secret })).status, 404);

    const badChain = await app.request('POST', '/v1/subscriptions', { key: org.secret, body: { address: 'x', chain: 'dogecoin', webhook_url: receiver.url } });
    assert.equal(badChain.body.error.param, 'chain');

    // Addresses are checked for the chain and the key's network, and kept in their canonical form.
    const mainnetInSandbox = await app.request('POST', '/v1/subscriptions', { key: org.secret, body: { address: 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4', chain: 'bitcoin', webhook_url: receiver.url } });
    assert.equal(mainnetInSandbox.status, 400);
    assert.equal(mainnetInSandbox.body.error.param, 'address');
    const lowerCase = await app.request('POST', '/v1/subscriptions', { key: org.secret, body: { address: '0x52908400098527886e0f7030069857d2e4169ee7', chain: 'ethereum', webhook_url: receiver.url } });
    assert.equal(lowerCase.body.address, '0x52908400098527886E0F7030069857D2E4169EE7');
  });

  it('checks scopes on every route', async () => {
    const { secret: reader } = await org.key(['webhooks:read']);
    const { secret: other } = await org.key(['cards:read']);
    const webhook = await createWebhook();
    const reads = ['/v1/webhooks/event-types', '/v1/webhooks', `/v1/webhooks/${webhook.body.id}`, '/v1/subscriptions', '/v1/events'];
    for (const path of reads) {
      assert.equal((await app.request('GET', path, { key: reader })).status, 200, path);
      const refused = await app.request('GET', path, { key: other });
      assert.equal(refused.status, 403, path);
      assert.equal(refused.body.error.details.required_scope, 'webhooks:read');
    }
    const writes: [string, string, unknown?][] = [
      ['POST', '/v1/webhooks', { name: 'x', url: receiver.url }],
      ['PATCH', `/v1/webhooks/${webhook.body.id}`, { name: 'y' }],
      ['DELETE', `/v1/webhooks/${webhook.body.id}`],
      ['POST', `/v1/webhooks/${webhook.body.id}/rotate-secret`],
      ['POST', `/v1/webhooks/${webhook.body.id}/test`],
      ['POST', '/v1/subscriptions', { address: 'a', chain: 'bitcoin', webhook_url: receiver.url }],
      ['POST', '/v1/events/dlv_x/retry'],
    ];
    for (const [method, path, body] of writes) {
      const refused = await app.request(method, path, { key: reader, body });
      assert.equal(refused.status, 403, `${method} ${path}`);
      assert.equal(refused.body.error.details.required_scope, 'webhooks:write');
    }
  });

  it("keeps each organization's endpoints, subscriptions and events to itself", async () => {
    const webhook = await createWebhook();
    const test = await app.request('POST', `/v1/webhooks/${webhook.body.id}/test`, { key: org.secret });
    const subscription = await app.request('POST', '/v1/subscriptions', { key: org.secret, body: { address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', chain: 'bitcoin', webhook_url: receiver.url } });
    const intruder = await createTestOrganization('Intruder');
    const attempts: [string, string, unknown?][] = [
      ['GET', `/v1/webhooks/${webhook.body.id}`],
      ['PATCH', `/v1/webhooks/${webhook.body.id}`, { name: 'mine' }],
      ['DELETE', `/v1/webhooks/${webhook.body.id}`],
      ['POST', `/v1/webhooks/${webhook.body.id}/rotate-secret`],
      ['POST', `/v1/webhooks/${webhook.body.id}/test`],
      ['GET', `/v1/subscriptions/${subscription.body.id}`],
      ['PATCH', `/v1/subscriptions/${subscription.body.id}`, { label: 'mine' }],
      ['DELETE', `/v1/subscriptions/${subscription.body.id}`],
      ['POST', `/v1/subscriptions/${subscription.body.id}/rotate-secret`],
      ['GET', `/v1/events/${test.body.id}`],
      ['POST', `/v1/events/${test.body.id}/retry`],
      ['GET', `/v1/events/${test.body.event_id}`],
      ['POST', `/v1/events/${test.body.event_id}/retry`],
      ['GET', `/v1/events/${randomUUID()}`],
    ];
    for (const [method, path, body] of attempts) {
      const response = await app.request(method, path, { key: intruder.secret, body });
      assert.equal(response.status, 404, `${method} ${path}`);
      assert.equal(response.body.error.code, 'resource_missing');
    }
    for (const path of ['/v1/webhooks', '/v1/subscriptions', '/v1/events', `/v1/events?event_id=${test.body.event_id}`]) {
      assert.deepEqual((await app.request('GET', path, { key: intruder.secret })).body.data, [], path);
    }
  });
  it("keeps sandbox and live apart: events reach only their environment's endpoints; the other environment's ids are 404 and unlisted", async () => {
    const o = await createTestOrganization('Two environments');
    await (await testOrm()).em.fork().nativeUpdate(Organization, { id: o.organizationId }, { policyActivationRequiredApprovals: 0 });
    const live = await o.key(['*'], 'live');
    const sandboxReceiver = await new WebhookReceiver().start();
    const liveReceiver = await new WebhookReceiver().start();
    try {
      const sandboxEndpoint = await app.request('POST', '/v1/webhooks', { key: o.secret, body: { name: 'Sandbox', url: sandboxReceiver.url } });
      assert.equal(sandboxEndpoint.status, 201, sandboxEndpoint.text);
      sandboxReceiver.secrets = [sandboxEndpoint.body.signing_secret];
      const liveEndpoint = await app.request('POST', '/v1/webhooks', { key: live.secret, body: { name: 'Live', url: 'https://93.184.215.14/hook', max_attempts: 1 } });
      assert.equal(liveEndpoint.status, 201, liveEndpoint.text);
      // Pointed at a local receiver behind the API's back: the live URL policy still refuses it at send time, so nothing leaves.
      await (await testOrm()).em.fork().nativeUpdate(WebhookEndpoint, { id: liveEndpoint.body.id }, { url: liveReceiver.url });

      // One event in each environment, emitted by real changes: a policy enforced with each key.
      const activate = async (key: string, name: string) => {
        const policy = await app.request('POST', '/v1/policies', { key, body: { name, rules: [{ name: 'Allow', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] }] } });
        assert.equal((await app.request('POST', `/v1/policies/${policy.body.id}/activate`, { key, body: {} })).status, 200);
        return policy.body.id as string;
      };
      const sandboxPolicy = await activate(o.secret, 'Sandbox policy');
      const livePolicy = await activate(live.secret, 'Live policy');

      const deliveries = async (key: string) => (await app.request('GET', '/v1/events?limit=100', { key })).body.data as { id: string; webhook_id: string; type: string; delivery_status: string; event_id: string }[];
      const sandboxDeliveries = await eventually(async () => {
        const listed = await deliveries(o.secret);
        return listed.length === 1 && listed[0]!.delivery_status === 'delivered' ? listed : undefined;
      }, 'the sandbox event delivered to the sandbox endpoint');
      assert.equal(sandboxDeliveries[0]!.webhook_id, sandboxEndpoint.body.id);
      const liveDeliveries = await eventually(async () => {
        const listed = await deliveries(live.secret);
        return listed.length === 1 && listed[0]!.delivery_status === 'failed' ? listed : undefined;
      }, 'the live event queued for the live endpoint only (and refused by its URL policy)');
      assert.equal(liveDeliveries[0]!.webhook_id, liveEndpoint.body.id);

      assert.deepEqual(sandboxReceiver.attempts.map((attempt) => JSON.parse(attempt.body).data.policy_id), [sandboxPolicy], 'the sandbox receiver saw the sandbox event only');
      assert.deepEqual(sandboxReceiver.attempts[0]!.verifiedWith, [true]);
      assert.equal(liveReceiver.attempts.length, 0);
      const stored = await (await testOrm()).em.fork().find(Event, { organization: o.organizationId }, { orderBy: { createdAt: 'asc' } });
      assert.deepEqual(stored.map((event) => [event.environment, event.data.policy_id]), [['sandbox', sandboxPolicy], ['live', livePolicy]]);

      // Explicit destinations must be of the event's environment too.
      await assert.rejects(
        (await testOrm()).em.fork().transactional((tx) =>
          emit(tx, { organizationId: o.organizationId, environment: 'live', type: 'webhook.test', data: {}, destinations: [{ kind: 'webhook', id: sandboxEndpoint.body.id }], broadcast: false }),
        ),
        /not a live destination/,
      );

      const sandboxSubscription = await app.request('POST', '/v1/subscriptions', { key: o.secret, body: { address: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', chain: 'bitcoin', webhook_url: sandboxReceiver.url } });
      const liveSubscription = await app.request('POST', '/v1/subscriptions', { key: live.secret, body: { address: 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4', chain: 'bitcoin', webhook_url: 'https://93.184.215.14/hook' } });
      assert.equal(liveSubscription.status, 201, liveSubscription.text);
      const sides = [
        { key: live.secret, webhook: sandboxEndpoint.body.id, subscription: sandboxSubscription.body.id, delivery: sandboxDeliveries[0]!.id, event: sandboxDeliveries[0]!.event_id },
        { key: o.secret, webhook: liveEndpoint.body.id, subscription: liveSubscription.body.id, delivery: liveDeliveries[0]!.id, event: liveDeliveries[0]!.event_id },
      ];
      for (const side of sides) {
        const attempts: [string, string, unknown?][] = [
          ['GET', `/v1/webhooks/${side.webhook}`],
          ['PATCH', `/v1/webhooks/${side.webhook}`, { name: 'mine' }],
          ['POST', `/v1/webhooks/${side.webhook}/rotate-secret`],
          ['POST', `/v1/webhooks/${side.webhook}/test`],
          ['DELETE', `/v1/webhooks/${side.webhook}`],
          ['GET', `/v1/subscriptions/${side.subscription}`],
          ['PATCH', `/v1/subscriptions/${side.subscription}`, { label: 'mine' }],
          ['POST', `/v1/subscriptions/${side.subscription}/rotate-secret`],
          ['DELETE', `/v1/subscriptions/${side.subscription}`],
          ['GET', `/v1/events/${side.delivery}`],
          ['POST', `/v1/events/${side.delivery}/retry`],
          ['GET', `/v1/events/${side.event}`],
        ];
        for (const [method, path, body] of attempts) {
          const response = await app.request(method, path, { key: side.key, body });
          assert.deepEqual([response.status, response.body.error?.code], [404, 'resource_missing'], `${method} ${path}`);
        }
        for (const [path, id] of [['/v1/webhooks', side.webhook], ['/v1/subscriptions', side.subscription], ['/v1/events', side.delivery]]) {
          const listed = await app.request('GET', `${path}?limit=100`, { key: side.key });
          assert.equal(listed.body.data.length, 1, path);
          assert.ok(!listed.body.data.some((item: { id: string }) => item.id === id), `${path} does not list the other environment's`);
        }
        assert.deepEqual((await app.request('GET', `/v1/events?webhook_id=${side.webhook}`, { key: side.key })).body.data, []);
        assert.deepEqual((await app.request('GET', `/v1/events?event_id=${side.event}`, { key: side.key })).body.data, []);
      }
      assert.equal((await app.request('GET', `/v1/webhooks/${sandboxEndpoint.body.id}`, { key: o.secret })).body.name, 'Sandbox', 'untouched');
    } finally {
      await sandboxReceiver.close();
      await liveReceiver.close();
    }
  });
});

describe('Loopback webhook targets', () => {
  const loopbackUrls = ['http://127.0.0.1:9/hook', 'https://localhost/hook', 'http://[::1]:9/hook'];
  const create = (app: TestApp, org: TestOrganization, url: string) => app.request('POST', '/v1/webhooks', { key: org.secret, body: { name: 'Local', url } });
  const withApp = async (allow: boolean, test: (app: TestApp) => Promise<void>) => {
    const app = await startTestApp({ config: { WEBHOOK_ALLOW_INSECURE_LOOPBACK: String(allow) } });
    try {
      await test(app);
    } finally {
      await app.close();
    }
  };

  it('are refused for live endpoints even with WEBHOOK_ALLOW_INSECURE_LOOPBACK set; sandbox ones only with it', async () => {
    const sandbox = await createTestOrganization('Loopback sandbox');
    const live = await createTestOrganization('Loopback live', 'live');
    await withApp(true, async (app) => {
      for (const url of loopbackUrls) {
        const refused = await create(app, live, url);
        assert.equal(refused.status, 400, url);
        assert.equal(refused.body.error.param, 'url');
        assert.equal((await create(app, sandbox, url)).status, 201, url);
      }
    });
    await withApp(false, async (app) => {
      for (const url of loopbackUrls) {
        const refused = await create(app, sandbox, url);
        assert.equal(refused.status, 400, url);
        assert.equal(refused.body.error.code, 'validation_failed');
        assert.equal(refused.body.error.param, 'url');
      }
    });
  });
});
