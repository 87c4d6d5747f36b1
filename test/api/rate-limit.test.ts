import assert from 'node:assert/strict';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';

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
