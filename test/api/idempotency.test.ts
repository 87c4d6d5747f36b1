import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ApiKey } from '../../src/api-keys/entities';
import { IdempotencyRecord } from '../../src/idempotency/entities';
import { requestHash } from '../../src/idempotency/service';
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
});
