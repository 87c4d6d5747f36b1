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
  const me = (app: TestApp, key?: string, forwardedFor?: string) =>
    app.request('GET', '/v1/api-keys/me', { key, headers: forwardedFor ? { 'x-forwarded-for': forwardedFor } : {} });
  const bogus = `sk_test_${'x'.repeat(32)}`;
  const withApp = async (config: Record<string, string>, test: (app: TestApp) => Promise<void>) => {
    const app = await startTestApp({ config });
    try {
      await test(app);
    } finally {
      await app.close();
    }
  };
  const slow = { AUTH_FAILURE_RATE_LIMIT_BURST: '3', AUTH_FAILURE_RATE_LIMIT_PER_SECOND: '0.01' };

  it('answers 429 to a client address that keeps sending bogus or missing keys', () =>
    withApp(slow, async (app) => {
      for (let i = 0; i < 3; i += 1) assert.equal((await me(app, bogus)).status, 401);
      const limited = await me(app, bogus);
      assert.equal(limited.status, 429);
      assert.equal(limited.body.error.code, 'rate_limited');
      assert.ok(Number(limited.headers.get('retry-after')) >= 1);
      assert.equal((await me(app)).status, 429, 'a missing key counts too');
    }));

  it('never refuses a valid key because bad keys came from the same address, nor spends the bucket on it', () =>
    // The defaults (a burst of 30), as `npm start` runs: no proxy is trusted.
    withApp({}, async (app) => {
      const org = await createTestOrganization();
      const started = performance.now();
      let unauthorized = 0;
      const bad = async () => {
        const { status } = await me(app, bogus, '203.0.113.7');
        if (status === 401) unauthorized += 1;
        return status;
      };
      const statuses = new Set<number>();
      for (let i = 0; i < 40; i += 1) statuses.add(await bad());
      assert.deepEqual([...statuses].sort(), [401, 429]);
      const valid = await me(app, org.secret, '203.0.113.7');
      assert.equal(valid.status, 200, valid.text);
      // Not in the process's key cache either: a key it never saw is looked up all the same.
      const other = await org.key(['cards:read']);
      assert.equal((await me(app, other.secret, '203.0.113.7')).status, 200);
      // Bad keys are refused again as soon as the tokens refilled meanwhile are spent.
      let status = 0;
      for (let i = 0; i < 100 && status !== 429; i += 1) status = await bad();
      assert.equal(status, 429, 'bad keys stay refused');
      // The burst (30) and the refill at AUTH_FAILURE_RATE_LIMIT_PER_SECOND (2) since the first request, and no more.
      const allowance = 30 + Math.ceil(((performance.now() - started) / 1000) * 2);
      assert.ok(unauthorized <= allowance, `${unauthorized} bad keys answered 401; the bucket allows ${allowance}`);
    }));

  it('ignores X-Forwarded-For unless TRUST_PROXY is set, then takes the entry the trusted proxies appended', async () => {
    await withApp(slow, async (app) => {
      for (let i = 0; i < 3; i += 1) assert.equal((await me(app, bogus, `203.0.113.${i}`)).status, 401);
      assert.equal((await me(app, bogus, '198.51.100.1')).status, 429, 'the header does not choose the bucket');
    });
    await withApp({ ...slow, TRUST_PROXY: '1' }, async (app) => {
      for (let i = 0; i < 3; i += 1) assert.equal((await me(app, bogus, '203.0.113.7')).status, 401);
      assert.equal((await me(app, bogus, '203.0.113.7')).status, 429);
      assert.equal((await me(app, bogus, '198.51.100.1')).status, 401, 'another forwarded address has its own bucket');
      assert.equal((await me(app, bogus, '198.51.100.2, 203.0.113.7')).status, 429, 'an entry the client wrote before the proxy\'s is ignored');
    });
  });

  it('remembers at most its bound of addresses however many distinct ones send bad keys', () =>
    withApp({ TRUST_PROXY: '1', AUTH_FAILURE_RATE_LIMIT_MAX_ADDRESSES: '50' }, async (app) => {
      for (let i = 0; i < 200; i += 1) assert.equal((await me(app, bogus, `10.0.${i >> 8}.${i & 255}`)).status, 401);
      assert.equal(app.deps.authFailureLimiter.size, 50);
    }));
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

  it('serves every waiting request of a busy key with one take when a round trip outlasts a lease (slow commits)', async () => {
    const org = await createTestOrganization();
    const em = (await testOrm()).em;
    // Each take's round trip lasts 200 ms on the bucket's clock, four leases: the batch must not shrink take after take.
    let clock = Date.now();
    let takes = 0;
    const slow = {
      getConnection: () => ({
        execute: async (...args: Parameters<ReturnType<typeof em.getConnection>['execute']>) => {
          const rows = await em.getConnection().execute(...args);
          takes += 1;
          clock += 200;
          return rows;
        },
      }),
    } as unknown as typeof em;
    const bucket = new SharedTokenBucket(1_000_000, 1_000_000, () => clock);
    const perWave: number[] = [];
    for (let wave = 0; wave < 6; wave += 1) {
      const before = takes;
      const decisions = await Promise.all(Array.from({ length: 50 }, () => bucket.take(slow, org.apiKeyId)));
      assert.ok(decisions.every((decision) => decision.allowed));
      perWave.push(takes - before);
    }
    // The first take of a wave is sized before the wave's other requests arrive, the next serves all of them, and one
    // ahead of need may start near the end of a wave and end in the next. Sized by demand alone, each take would be a
    // fraction of the last (a lease's share of a round trip's arrivals), down to one request per round trip.
    assert.ok(perWave.every((count) => count <= 4), `round trips per wave of 50 requests: ${perWave.join(', ')}`);
  });
});
