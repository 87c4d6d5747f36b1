import assert from 'node:assert/strict';
import { SharedTokenBucket } from '../../src/http/rate-limit';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { testOrm } from '../support/environment';

describe('Rate limiting', () => {
  let app: TestApp;

  before(async () => {
    // Three requests of burst and a refill slow enough that none comes back during the test.
    app = await startTestApp({ config: { RATE_LIMIT_BURST: '3', RATE_LIMIT_PER_SECOND: '0.01' } });
  });
  after(() => app?.close());

  it('answers 429 rate_limited with Retry-After once a key spends its bucket, per key', async () => {
    const org = await createTestOrganization();
    const remaining: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const response = await app.request('GET', '/v1/api-keys/me', { key: org.secret });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('ratelimit-limit'), '3');
      remaining.push(response.headers.get('ratelimit-remaining') ?? '');
    }
    assert.deepEqual(remaining, ['2', '1', '0']);

    const limited = await app.request('GET', '/v1/api-keys/me', { key: org.secret });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.error.type, 'rate_limit_error');
    assert.equal(limited.body.error.code, 'rate_limited');
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    assert.equal(limited.headers.get('ratelimit-remaining'), '0');
    assert.ok(Number(limited.headers.get('ratelimit-reset')) >= 1);

    const other = await org.key(['cards:read']);
    assert.equal((await app.request('GET', '/v1/api-keys/me', { key: other.secret })).status, 200, 'another key has its own bucket');
  });
});

describe('Rate limiting of invalid keys', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp({ config: { AUTH_FAILURE_RATE_LIMIT_BURST: '3', AUTH_FAILURE_RATE_LIMIT_PER_SECOND: '0.01' } });
  });
  after(() => app?.close());

  it('refuses a client address that keeps sending bogus keys with 429 before any lookup; valid keys are unaffected', async () => {
    const bogus = `sk_test_${'x'.repeat(32)}`;
    for (let i = 0; i < 3; i += 1) assert.equal((await app.request('GET', '/v1/api-keys/me', { key: bogus })).status, 401);
    const limited = await app.request('GET', '/v1/api-keys/me', { key: bogus });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.error.code, 'rate_limited');
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    assert.equal((await app.request('GET', '/v1/api-keys/me')).status, 429, 'a missing key counts too');
  });

  it('does not spend the address bucket on valid keys', async () => {
    const fresh = await startTestApp({ config: { AUTH_FAILURE_RATE_LIMIT_BURST: '1', AUTH_FAILURE_RATE_LIMIT_PER_SECOND: '0.01' } });
    try {
      const org = await createTestOrganization();
      for (let i = 0; i < 5; i += 1) assert.equal((await fresh.request('GET', '/v1/api-keys/me', { key: org.secret })).status, 200);
      assert.equal((await fresh.request('GET', '/v1/api-keys/me', { key: `sk_test_${'y'.repeat(32)}` })).status, 401);
      assert.equal((await fresh.request('GET', '/v1/api-keys/me', { key: `sk_test_${'y'.repeat(32)}` })).status, 429);
    } finally {
      await fresh.close();
    }
  });
});

describe('Shared token bucket under load', () => {
  const bucketRow = async (apiKeyId: string) => {
    const [row] = await (await testOrm()).em.getConnection().execute<{ tokens: number; taken: number }[]>(
      'select tokens, taken from api_key_rate_buckets where api_key_id = ?',
      [apiKeyId],
    );
    return row!;
  };

  it('lets two processes together spend no more than one burst, however hard they race', async () => {
    const org = await createTestOrganization();
    const em = (await testOrm()).em;
    // Two API processes' buckets on one key: 100 of burst, a refill too slow to add a token during the test.
    const processes = [new SharedTokenBucket(100, 0.001), new SharedTokenBucket(100, 0.001)];
    const decisions = await Promise.all(Array.from({ length: 300 }, (_, i) => processes[i % 2]!.take(em, org.apiKeyId)));
    const allowed = decisions.filter((decision) => decision.allowed).length;
    // Tokens one process took and could not spend within its lease are dropped: never more than the burst.
    assert.ok(allowed <= 100 && allowed >= 50, `${allowed} allowed of a burst of 100`);
    assert.ok((await bucketRow(org.apiKeyId)).tokens < 1, 'the shared bucket is spent');
    const refused = decisions.find((decision) => !decision.allowed)!;
    assert.equal(refused.remaining, 0);
    assert.ok(refused.resetSeconds >= 1);
  });

  it('takes tokens in batches for a busy key, and one at a time for a quiet one', async () => {
    const org = await createTestOrganization();
    const em = (await testOrm()).em;
    const bucket = new SharedTokenBucket(1_000_000, 1_000_000);
    await bucket.take(em, org.apiKeyId);
    assert.equal((await bucketRow(org.apiKeyId)).taken, 1, 'a first request takes one token');
    for (let wave = 0; wave < 5; wave += 1) await Promise.all(Array.from({ length: 200 }, () => bucket.take(em, org.apiKeyId)));
    assert.ok((await bucketRow(org.apiKeyId)).taken > 1, 'a busy key takes more than one token per round trip');

    const quiet = await createTestOrganization();
    const remaining: number[] = [];
    const exact = new SharedTokenBucket(5, 0.001);
    for (let i = 0; i < 3; i += 1) {
      remaining.push((await exact.take(em, quiet.apiKeyId)).remaining);
      await new Promise((resolve) => setTimeout(resolve, 60));
    }
    assert.deepEqual(remaining, [4, 3, 2], 'one token per request, as a single shared counter');
    assert.equal((await bucketRow(quiet.apiKeyId)).taken, 1);
  });
});
