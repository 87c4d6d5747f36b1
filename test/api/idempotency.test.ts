import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ApiKey } from '../../src/api-keys/entities';
import type { RouteRegistry } from '../../src/http/route';
import { IdempotencyRecord } from '../../src/idempotency/entities';
import { IdempotencyService, requestHash } from '../../src/idempotency/service';
import { PolicyAuditLog } from '../../src/policies/entities';
import { systemActor, writeAudit } from '../../src/policies/service';
import { z } from '../../src/shared/schemas';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

describe('Idempotency-Key', () => {
  let app: TestApp;
  let org: TestOrganization;

  /** An in-flight claim of POST /v1/api-keys, as a request leaves it before it commits. */
  async function insertClaim(key: string, body: unknown, lockedAt: Date) {
    const em = (await testOrm()).em.fork();
    em.create(IdempotencyRecord, {
      organizationId: org.organizationId,
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
  });
  after(() => app?.close());

  it('replays the stored status and body for the same key and body, creating nothing new', async () => {
    const key = randomUUID();
    const body = { name: 'Idempotent', scopes: ['cards:read'] };
    const first = await app.request('POST', '/v1/api-keys', { key: org.secret, body, headers: { 'idempotency-key': key } });
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const countAfterFirst = await keyCount();

    // Same document, keys in another order: the same request.
    const second = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
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
    await app.request('POST', '/v1/api-keys', { key: org.secret, body: { name: 'A', scopes: ['cards:read'] }, headers: { 'idempotency-key': key } });
    const count = await keyCount();
    const reused = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
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
    const response = await app.request('POST', '/v1/api-keys', { key: org.secret, body, headers: { 'idempotency-key': key } });
    assert.equal(response.status, 409);
    assert.equal(response.body.error.code, 'idempotency_key_in_use');
  });

  it('lets a retry take over a claim abandoned by a crashed request once its lock lapses', async () => {
    const key = randomUUID();
    const body = { name: 'Abandoned', scopes: ['cards:read'] };
    await insertClaim(key, body, new Date(Date.now() - 10 * 60 * 1000));
    const response = await app.request('POST', '/v1/api-keys', { key: org.secret, body, headers: { 'idempotency-key': key } });
    assert.equal(response.status, 201);
    const replay = await app.request('POST', '/v1/api-keys', { key: org.secret, body, headers: { 'idempotency-key': key } });
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.body.id, response.body.id);
  });

  it('creates exactly one resource when many requests race with one key', async () => {
    const key = randomUUID();
    const body = { name: 'Raced', scopes: ['cards:read'] };
    const count = await keyCount();
    const responses = await Promise.all(
      Array.from({ length: 12 }, () => app.request('POST', '/v1/api-keys', { key: org.secret, body, headers: { 'idempotency-key': key } })),
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
    const invalid = await app.request('POST', '/v1/api-keys', { key: org.secret, body: { name: '', scopes: [] }, headers: { 'idempotency-key': invalidKey } });
    assert.equal(invalid.status, 400);
    const fixed = await app.request('POST', '/v1/api-keys', { key: org.secret, body: { name: 'Fixed', scopes: ['cards:read'] }, headers: { 'idempotency-key': invalidKey } });
    assert.equal(fixed.status, 201, 'a request that failed validation never claimed the key');
  });

  it('scopes keys to the organization', async () => {
    const key = randomUUID();
    const other = await createTestOrganization('Other org');
    const body = { name: 'Shared key', scopes: ['cards:read'] };
    const mine = await app.request('POST', '/v1/api-keys', { key: org.secret, body, headers: { 'idempotency-key': key } });
    const theirs = await app.request('POST', '/v1/api-keys', { key: other.secret, body, headers: { 'idempotency-key': key } });
    assert.equal(theirs.status, 201);
    assert.equal(theirs.headers.get('idempotent-replayed'), null);
    assert.notEqual(theirs.body.id, mine.body.id);
  });

  it('rejects an overlong key', async () => {
    const response = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
      body: { name: 'x', scopes: ['cards:read'] },
      headers: { 'idempotency-key': 'k'.repeat(256) },
    });
    assert.equal(response.status, 400);
    assert.equal(response.body.error.param, 'Idempotency-Key');
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
      assert.deepEqual(record.responseBody, { run: 2 });
      const replay = await send();
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(replay.body, { run: 2 });
    });

    it('neither completes nor releases with a stale token, and release leaves a completed claim alone', async () => {
      const service = new IdempotencyService(60);
      const request = { organizationId: org.organizationId, key: randomUUID(), method: 'POST', path: '/v1/test/slow-work', body: {} };
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
      await assert.rejects(em.transactional((tx) => service.complete(tx, first, 201, { stale: true })), /taken it over|took it over/);
      // The holder's transaction commits, then the caller sees an error (a commit-phase failure) and releases.
      await em.transactional((tx) => service.complete(tx, second, 201, { done: true }));
      await service.release(em, second);
      const record = await em.fork().findOneOrFail(IdempotencyRecord, { id: first.id });
      assert.equal(record.status, 'completed', 'committed work keeps its claim');
      assert.deepEqual(record.responseBody, { done: true });
    });
  });
});
