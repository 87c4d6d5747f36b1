import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ApiKey } from '../../src/api-keys/entities';
import type { RouteRegistry } from '../../src/http/route';
import { webhookDestinationResolver } from '../../src/events/destinations';
import { generateSigningSecret, sealClearSigningSecrets } from '../../src/events/secrets';
import { IdempotencyRecord } from '../../src/idempotency/entities';
import { IdempotencyService, jsonResponse, requestHash } from '../../src/idempotency/service';
import { keyProviderFor } from '../../src/keys/provider';
import { PolicyAuditLog } from '../../src/policies/entities';
import { systemActor, writeAudit } from '../../src/policies/service';
import { z } from '../../src/shared/schemas';
import { createTestOrganization, operatorMember, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { validCustomer } from '../support/cards';
import { testConfig, testOrm } from '../support/environment';
import { WebhookReceiver } from '../support/webhook-receiver';

describe('Idempotency-Key', () => {
  let app: TestApp;
  let org: TestOrganization;
  /** A key acting for the organization's owner: keys minted through the API act for a member. */
  let minter: string;

  /** An in-flight claim of POST /v1/api-keys, as a request leaves it before it commits. */
  async function insertClaim(key: string, body: unknown, lockedAt: Date) {
    const em = (await testOrm()).em.fork();
    em.create(IdempotencyRecord, {
      organizationId: org.organizationId,
      environment: 'sandbox',
      key,
      requestHash: requestHash({ method: 'POST', path: '/v1/api-keys', body }),
      method: 'POST',
      path: '/v1/api-keys',
      status: 'in_flight',
      lockedAt,
      createdAt: lockedAt,
    });
    await em.flush();
  }

  const keyCount = async () => (await testOrm()).em.fork().count(ApiKey, { organization: org.organizationId });

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization();
    minter = (await operatorMember(org.organizationId)).secret;
  });
  after(() => app?.close());

  it('replays the stored status and body for the same key and body, creating nothing new', async () => {
    const key = randomUUID();
    const body = { name: 'Idempotent', scopes: ['cards:read'] };
    const first = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const countAfterFirst = await keyCount();

    // Same document, keys in another order: the same request.
    const second = await app.request('POST', '/v1/api-keys', {
      key: minter,
      body: { scopes: ['cards:read'], name: 'Idempotent' },
      headers: { 'idempotency-key': key },
    });
    assert.equal(second.status, 201);
    assert.equal(second.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(second.body, first.body);
    assert.equal(await keyCount(), countAfterFirst);
  });

  it('answers 409 idempotency_key_reused when the key comes back with another body', async () => {
    const key = randomUUID();
    await app.request('POST', '/v1/api-keys', { key: minter, body: { name: 'A', scopes: ['cards:read'] }, headers: { 'idempotency-key': key } });
    const count = await keyCount();
    const reused = await app.request('POST', '/v1/api-keys', {
      key: minter,
      body: { name: 'B', scopes: ['cards:read'] },
      headers: { 'idempotency-key': key },
    });
    assert.equal(reused.status, 409);
    assert.equal(reused.body.error.type, 'idempotency_error');
    assert.equal(reused.body.error.code, 'idempotency_key_reused');
    assert.equal(await keyCount(), count);
  });

  it('answers 409 idempotency_key_in_use while the first request with the key is in flight', async () => {
    const key = randomUUID();
    const body = { name: 'In flight', scopes: ['cards:read'] };
    // The state a concurrent request leaves between its claim and its commit.
    await insertClaim(key, body, new Date());
    const response = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    assert.equal(response.status, 409);
    assert.equal(response.body.error.code, 'idempotency_key_in_use');
  });

  it('lets a retry take over a claim abandoned by a crashed request once its lock lapses', async () => {
    const key = randomUUID();
    const body = { name: 'Abandoned', scopes: ['cards:read'] };
    await insertClaim(key, body, new Date(Date.now() - 10 * 60 * 1000));
    const response = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    assert.equal(response.status, 201);
    const replay = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.body.id, response.body.id);
  });

  it('creates exactly one resource when many requests race with one key', async () => {
    const key = randomUUID();
    const body = { name: 'Raced', scopes: ['cards:read'] };
    const count = await keyCount();
    const responses = await Promise.all(
      Array.from({ length: 12 }, () => app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } })),
    );
    assert.equal(await keyCount(), count + 1);
    const created = responses.filter((response) => response.status === 201);
    const inUse = responses.filter((response) => response.status === 409);
    assert.equal(created.length + inUse.length, responses.length, JSON.stringify(responses.map((r) => r.status)));
    assert.ok(created.length >= 1);
    assert.equal(new Set(created.map((response) => response.body.id)).size, 1, 'every success is the same key');
    assert.ok(inUse.every((response) => response.body.error.code === 'idempotency_key_in_use'));
  });

  it('stores a refusal and replays it, but not a validation failure', async () => {
    const key = randomUUID();
    const { secret } = await org.key(['api_keys:admin', 'cards:read']);
    const refused = await app.request('POST', '/v1/api-keys', { key: secret, body: { name: 'x', scopes: ['cards:secure'] }, headers: { 'idempotency-key': key } });
    assert.equal(refused.status, 403);
    const again = await app.request('POST', '/v1/api-keys', { key: secret, body: { name: 'x', scopes: ['cards:secure'] }, headers: { 'idempotency-key': key } });
    assert.equal(again.status, 403);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(again.body, refused.body);

    const invalidKey = randomUUID();
    const invalid = await app.request('POST', '/v1/api-keys', { key: minter, body: { name: '', scopes: [] }, headers: { 'idempotency-key': invalidKey } });
    assert.equal(invalid.status, 400);
    const fixed = await app.request('POST', '/v1/api-keys', { key: minter, body: { name: 'Fixed', scopes: ['cards:read'] }, headers: { 'idempotency-key': invalidKey } });
    assert.equal(fixed.status, 201, 'a request that failed validation never claimed the key');
  });

  it('scopes keys to the organization', async () => {
    const key = randomUUID();
    const other = await createTestOrganization('Other org');
    const body = { name: 'Shared key', scopes: ['cards:read'] };
    const mine = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    const theirs = await app.request('POST', '/v1/api-keys', { key: (await operatorMember(other.organizationId)).secret, body, headers: { 'idempotency-key': key } });
    assert.equal(theirs.status, 201);
    assert.equal(theirs.headers.get('idempotent-replayed'), null);
    assert.notEqual(theirs.body.id, mine.body.id);
  });

  /** The record's row as stored, every column as text: what a database dump would show. */
  async function storedRecord(key: string, organizationId = org.organizationId): Promise<string> {
    const rows = await (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ row: string }[]>(`select r::text as row from idempotency_records r where organization_id = ? and key = ?`, [organizationId, key], 'all');
    assert.equal(rows.length, 1);
    return rows[0]!.row;
  }

  it('keeps the records of the sandbox and the live keys of one organization apart', async () => {
    const key = randomUUID();
    const live = await operatorMember(org.organizationId, { name: 'Live owner', environment: 'live' });
    const body = { name: 'Same key, two environments', scopes: ['cards:read'] };
    const sandbox = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    const inLive = await app.request('POST', '/v1/api-keys', { key: live.secret, body, headers: { 'idempotency-key': key } });
    assert.equal(sandbox.status, 201);
    assert.equal(inLive.status, 201);
    assert.equal(inLive.headers.get('idempotent-replayed'), null, 'the live key does not replay the sandbox response');
    assert.notEqual(inLive.body.id, sandbox.body.id);
    assert.match(sandbox.body.secret, /^sk_test_/);
    assert.match(inLive.body.secret, /^sk_live_/);
    // Each environment replays its own response.
    const liveReplay = await app.request('POST', '/v1/api-keys', { key: live.secret, body, headers: { 'idempotency-key': key } });
    assert.equal(liveReplay.headers.get('idempotent-replayed'), 'true');
    assert.equal(liveReplay.text, inLive.text);
    const sandboxReplay = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    assert.equal(sandboxReplay.text, sandbox.text);
  });

  it('replays a new API key with its secret, which the stored record does not hold in clear', async () => {
    const key = randomUUID();
    const body = { name: 'Sealed', scopes: ['cards:read'] };
    const first = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    assert.match(first.body.secret, /^sk_test_[0-9A-Za-z]{32}$/);
    const replay = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.text, first.text, 'byte for byte');
    assert.equal(replay.headers.get('content-type'), first.headers.get('content-type'));
    assert.equal(replay.body.secret, first.body.secret);
    const stored = await storedRecord(key);
    assert.doesNotMatch(stored, /sk_(test|live)_/);
    assert.ok(!stored.includes(first.body.secret.slice(8)), 'not even the random part of the secret');
    assert.ok(!stored.includes(first.body.id), 'the whole response is sealed');
  });

  describe('webhook signing secrets', () => {
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await new WebhookReceiver().start();
    });
    after(() => receiver?.close());

    it('replays a webhook endpoint with its whsec_ secret; neither the record nor the endpoint holds it in clear', async () => {
      const key = randomUUID();
      const body = { name: 'Sealed endpoint', url: receiver.url };
      const first = await app.request('POST', '/v1/webhooks', { key: org.secret, body, headers: { 'idempotency-key': key } });
      assert.equal(first.status, 201);
      assert.match(first.body.signing_secret, /^whsec_/);
      const replay = await app.request('POST', '/v1/webhooks', { key: org.secret, body, headers: { 'idempotency-key': key } });
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal(replay.text, first.text);
      assert.doesNotMatch(await storedRecord(key), /whsec_/);

      const connection = (await testOrm()).em.fork().getConnection();
      const [endpoint] = await connection.execute<{ row: string }[]>(`select w::text as row from webhook_endpoints w where id = ?`, [first.body.id], 'all');
      assert.doesNotMatch(endpoint!.row, /whsec_/);
      assert.ok(!endpoint!.row.includes(first.body.signing_secret.slice(6)));

      const rotateKey = randomUUID();
      const rotated = await app.request('POST', `/v1/webhooks/${first.body.id}/rotate-secret`, { key: org.secret, headers: { 'idempotency-key': rotateKey } });
      assert.equal(rotated.status, 200);
      assert.match(rotated.body.signing_secret, /^whsec_/);
      assert.doesNotMatch(await storedRecord(rotateKey), /whsec_/);
      const [afterRotation] = await connection.execute<{ row: string }[]>(`select w::text as row from webhook_endpoints w where id = ?`, [first.body.id], 'all');
      assert.doesNotMatch(afterRotation!.row, /whsec_/);
    });

    it('honours Idempotency-Key outside /v1: a retried POST /api/cards creates one card and replays the first response byte for byte', async () => {
      const key = randomUUID();
      const body = { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Ada Lovelace', customer: validCustomer(), webhook_url: receiver.url };
      const cards = async () => (await testOrm()).em.fork().getConnection().execute<{ id: string }[]>(`select id from cards where organization_id = ?`, [org.organizationId], 'all');
      const before = (await cards()).length;
      const first = await app.request('POST', '/api/cards', { key: org.secret, body, headers: { 'idempotency-key': key } });
      assert.equal(first.status, 201, first.text);
      assert.match(first.body.data.card.webhook_signing_secret, /^whsec_/);
      const retry = await app.request('POST', '/api/cards', { key: org.secret, body, headers: { 'idempotency-key': key } });
      assert.equal(retry.status, 201);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
      assert.equal(retry.text, first.text, 'the replay is the first response byte for byte');
      assert.equal(retry.headers.get('content-type'), first.headers.get('content-type'));
      assert.equal((await cards()).length, before + 1, 'one card');
      assert.doesNotMatch(await storedRecord(key), /whsec_/);
      const [card] = await (await testOrm()).em
        .fork()
        .getConnection()
        .execute<{ row: string }[]>(`select c::text as row from cards c where id = ?`, [first.body.data.card.id], 'all');
      assert.doesNotMatch(card!.row, /whsec_/);
    });
  });

  it('documents Idempotency-Key on every authenticated POST, /v1 or not', async () => {
    const document = (await app.request('GET', '/openapi.json')).body;
    const createCard = document.paths['/api/cards'].post;
    assert.ok(createCard.parameters.some((parameter: { in: string; name: string }) => parameter.in === 'header' && parameter.name === 'Idempotency-Key'));
  });

  it('rejects an overlong key', async () => {
    const response = await app.request('POST', '/v1/api-keys', {
      key: minter,
      body: { name: 'x', scopes: ['cards:read'] },
      headers: { 'idempotency-key': 'k'.repeat(256) },
    });
    assert.equal(response.status, 400);
    assert.equal(response.body.error.param, 'Idempotency-Key');
  });

  it('seals what was stored in clear before (the cli migrate step), and still reads it until then', async () => {
    const receiver = await new WebhookReceiver().start();
    try {
      const em = (await testOrm()).em.fork();
      const connection = em.getConnection();
      const endpoint = await app.request('POST', '/v1/webhooks', { key: org.secret, body: { name: 'Legacy', url: receiver.url } });
      const clear = generateSigningSecret();
      await connection.execute(`update webhook_endpoints set secret_current = ? where id = ?`, [clear, endpoint.body.id]);
      const resolve = async () => (await webhookDestinationResolver.resolve(em.fork(), app.deps.config, org.organizationId, endpoint.body.id))!.secrets;
      assert.deepEqual(await resolve(), [clear], 'a clear secret is read as is');

      const key = randomUUID();
      const body = { name: 'Legacy response', scopes: ['cards:read'] };
      const first = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
      await connection.execute(`update idempotency_records set response_body = ?, response_format = 'clear' where organization_id = ? and key = ?`, [
        first.text,
        org.organizationId,
        key,
      ]);
      assert.equal((await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } })).text, first.text);

      assert.ok((await sealClearSigningSecrets(em, app.deps.keys.provider)) >= 1);
      assert.ok((await app.deps.idempotency.sealClearResponses(em)) >= 1);
      const [row] = await connection.execute<{ row: string }[]>(`select w::text as row from webhook_endpoints w where id = ?`, [endpoint.body.id], 'all');
      assert.doesNotMatch(row!.row, /whsec_/);
      assert.deepEqual(await resolve(), [clear], 'the sealed secret signs as before');
      assert.doesNotMatch(await storedRecord(key), /sk_test_/);
      const replay = await app.request('POST', '/v1/api-keys', { key: minter, body, headers: { 'idempotency-key': key } });
      assert.equal(replay.text, first.text);
    } finally {
      await receiver.close();
    }
  });

  describe('a claim taken over while its first handler still runs', () => {
    let slowApp: TestApp;
    /** The first call of the slow route waits here until the test lets it go on. */
    let firstEntered: () => void;
    let releaseFirst: () => void;
    let calls = 0;

    /** Records one marker row per handler run, in the handler's transaction; the first run waits in between. */
    const slowModule = (routes: RouteRegistry) =>
      routes.add({
        method: 'post',
        path: '/v1/test/slow-work',
        operationId: 'testSlowWork',
        summary: 'Test only: slow work',
        tag: 'Test',
        scope: 'authenticated',
        body: z.object({ marker: z.string() }),
        response: { status: 201, description: 'Done' },
        handler: async ({ auth, em, body }) => {
          calls += 1;
          const run = calls;
          writeAudit(em, { actor: systemActor(auth.organizationId), policyId: null, action: body.marker, metadata: { run } });
          if (run === 1) {
            firstEntered();
            await new Promise<void>((resolve) => (releaseFirst = resolve));
          }
          return { status: 201, body: { run } };
        },
      });

    before(async () => {
      slowApp = await startTestApp({ extraModules: [slowModule] });
    });
    after(() => slowApp?.close());

    it('stores exactly one outcome and keeps the work of the taker only: the stale handler rolls back', async () => {
      const key = randomUUID();
      const body = { marker: `slow-${key}` };
      const send = () => slowApp.request('POST', '/v1/test/slow-work', { key: org.secret, body, headers: { 'idempotency-key': key } });
      const entered = new Promise<void>((resolve) => (firstEntered = resolve));
      const first = send();
      await entered;
      // The first handler has held the claim past the lock timeout (a stuck request): a retry takes it over.
      const em = (await testOrm()).em.fork();
      await em.nativeUpdate(IdempotencyRecord, { organizationId: org.organizationId, key }, { lockedAt: new Date(Date.now() - 10 * 60 * 1000) });
      const second = await send();
      assert.equal(second.status, 201);
      assert.equal(second.body.run, 2);

      releaseFirst();
      const stale = await first;
      assert.equal(stale.status, 409, 'the handler whose claim was taken over cannot complete');
      assert.equal(stale.body.error.code, 'idempotency_key_in_use');

      const markers = await em.fork().find(PolicyAuditLog, { organization: org.organizationId, action: body.marker });
      assert.deepEqual(markers.map((marker) => marker.metadata.run), [2], 'the work is done once, by the taker');
      const record = await em.fork().findOneOrFail(IdempotencyRecord, { organizationId: org.organizationId, key });
      assert.equal(record.status, 'completed');
      const replay = await send();
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(replay.body, { run: 2 });
    });

    it('neither completes nor releases with a stale token, and release leaves a completed claim alone', async () => {
      const service = new IdempotencyService(60, keyProviderFor(testConfig()));
      const request = { organizationId: org.organizationId, environment: 'sandbox' as const, key: randomUUID(), method: 'POST', path: '/v1/test/slow-work', body: {} };
      const em = (await testOrm()).em.fork();
      const first = await service.claim(em, request);
      assert.equal(first.kind, 'claimed');
      await em.nativeUpdate(IdempotencyRecord, { organizationId: org.organizationId, key: request.key }, { lockedAt: new Date(Date.now() - 10 * 60 * 1000) });
      const second = await service.claim(em, request);
      assert.ok(first.kind === 'claimed' && second.kind === 'claimed');
      assert.equal(second.id, first.id);
      assert.notEqual(second.token, first.token);

      await service.release(em, first);
      assert.equal(await em.count(IdempotencyRecord, { id: first.id }), 1, 'a stale release does not free the new holder');
      await assert.rejects(em.transactional((tx) => service.complete(tx, first, jsonResponse(201, { stale: true }))), /taken it over|took it over/);
      // The holder's transaction commits, then the caller sees an error (a commit-phase failure) and releases.
      await em.transactional((tx) => service.complete(tx, second, jsonResponse(201, { done: true })));
      await service.release(em, second);
      const record = await em.fork().findOneOrFail(IdempotencyRecord, { id: first.id });
      assert.equal(record.status, 'completed', 'committed work keeps its claim');
      const replay = await service.claim(em, request);
      assert.ok(replay.kind === 'replay');
      assert.equal(replay.body, '{"done":true}');
    });
  });
});
