import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ApiKeyCache, RECONNECT_MS, type KeyRow } from '../../src/api-keys/key-cache';
import { hashSecret } from '../../src/api-keys/service';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';

/**
 * The key cache of each API process against the real PostgreSQL: a change to a key, made by any
 * process or by hand in SQL, evicts it through the api_keys trigger's notice; a lookup that raced a
 * notice is not cached; without its listener the cache serves nothing.
 */
describe('API key cache', () => {
  const caches: ApiKeyCache[] = [];
  const newCache = async () => {
    const cache = new ApiKeyCache(testConfig().DATABASE_URL, 60_000, 100, testLogger('api'));
    caches.push(cache);
    await cache.start();
    return cache;
  };
  const rowOf = async (keyId: string): Promise<KeyRow> => {
    const [row] = await (await testOrm()).em.getConnection().execute<KeyRow[]>(
      'select id, organization_id, member_id, scopes, environment, api_version, last_used_at from api_keys where id = ?',
      [keyId],
    );
    return row!;
  };
  const sql = async (statement: string, params: unknown[]) => (await testOrm()).em.getConnection().execute(statement, params, 'run');

  after(async () => {
    await Promise.all(caches.map((cache) => cache.stop()));
  });

  it('evicts a key changed in SQL by anyone, and not when only its last use is stamped', async () => {
    const org = await createTestOrganization('Key cache');
    const { secret, id } = await org.key(['custody:read']);
    const cache = await newCache();
    cache.set(hashSecret(secret), await rowOf(id), cache.currentGeneration());
    assert.equal(cache.get(hashSecret(secret))?.id, id);

    // A change to another key after the stamp: once its eviction arrives, every notice before it has (notices come in commit order).
    const other = await org.key(['custody:read']);
    cache.set(hashSecret(other.secret), await rowOf(other.id), cache.currentGeneration());
    await sql('update api_keys set last_used_at = now() where id = ?', [id]);
    await sql(`update api_keys set scopes = '{custody:write}' where id = ?`, [other.id]);
    await eventually(async () => (cache.get(hashSecret(other.secret)) === undefined ? true : undefined), 'the later change to evict the other key', 1_000, 10);
    assert.equal(cache.get(hashSecret(secret))?.id, id, 'a last-use stamp changes nothing authentication reads');

    await sql(`update api_keys set scopes = '{custody:write}' where id = ?`, [id]);
    await eventually(async () => (cache.get(hashSecret(secret)) === undefined ? true : undefined), 'the scope change to evict the key', 1_000, 10);
  });

  it('does not cache a row whose read raced a change', async () => {
    const org = await createTestOrganization('Key cache race');
    const { secret, id } = await org.key(['custody:read']);
    const cache = await newCache();
    const generation = cache.currentGeneration();
    const row = await rowOf(id);
    await sql('update api_keys set revoked_at = now() where id = ?', [id]);
    await eventually(async () => (cache.currentGeneration() !== generation ? true : undefined), 'the revocation notice', 1_000, 10);
    cache.set(hashSecret(secret), row, generation);
    assert.equal(cache.get(hashSecret(secret)), undefined, 'the stale row read before the revocation was not cached');
  });

  it('serves nothing while its listener is down, and listens again', async () => {
    const org = await createTestOrganization('Key cache listener');
    const { secret, id } = await org.key(['custody:read']);
    const cache = await newCache();
    cache.set(hashSecret(secret), await rowOf(id), cache.currentGeneration());
    assert.ok(cache.get(hashSecret(secret)));

    // The listener's connection dies (a restart, a network cut): notices could be missed from now on.
    await sql(`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and query = 'listen api_key_changes' and pid <> pg_backend_pid()`, []);
    await eventually(async () => (cache.get(hashSecret(secret)) === undefined ? true : undefined), 'the cache to empty', 2_000, 10);

    // It reconnects by itself, and evictions work again.
    await eventually(
      async () => {
        cache.set(hashSecret(secret), await rowOf(id), cache.currentGeneration());
        return cache.get(hashSecret(secret)) ? true : undefined;
      },
      'the listener to reconnect',
      10_000,
      50,
    );
    await sql('update api_keys set revoked_at = now() where id = ?', [id]);
    await eventually(async () => (cache.get(hashSecret(secret)) === undefined ? true : undefined), 'the revocation to evict the key', 1_000, 10);
  });

  it('keeps one listening connection after losing it while the database refused it (a failover), however often it was asked for keys meanwhile', async function () {
    // A role of its own, to count this cache's connections and to refuse its logins for a while.
    const role = `key_cache_${randomBytes(6).toString('hex')}`;
    const url = new URL(testConfig().DATABASE_URL);
    url.username = role;
    url.password = 'key-cache-check';
    await sql(`create role ${role} login password 'key-cache-check'`, []);
    const connections = async () =>
      (await (await testOrm()).em.getConnection().execute<{ n: number }[]>('select count(*)::int as n from pg_stat_activity where usename = ?', [role]))[0]!.n;
    // A row cached and served again only while the listener listens.
    const listening = (row: KeyRow) => {
      cache.set('a secret hash', row, cache.currentGeneration());
      return cache.get('a secret hash') !== undefined;
    };
    const cache = new ApiKeyCache(url.toString(), 60_000, 100, testLogger('api'));
    try {
      await cache.start();
      const org = await createTestOrganization('Key cache failover');
      const row = await rowOf((await org.key(['custody:read'])).id);
      assert.ok(listening(row));
      assert.equal(await connections(), 1);

      // Down for a while, as between a primary's death and its standby's promotion: every reconnect fails, and
      // requests keep asking the cache (each lookup once started a connection of its own, and each failure planned a reconnect).
      await sql(`alter role ${role} nologin`, []);
      await sql(`select pg_terminate_backend(pid) from pg_stat_activity where usename = ?`, [role]);
      await eventually(async () => (cache.get('a secret hash') === undefined ? true : undefined), 'the listener lost', 2_000, 10);
      for (let lookup = 0; lookup < 40; lookup += 1) {
        assert.equal(cache.get('a secret hash'), undefined, 'nothing served while the listener is down');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await sql(`alter role ${role} login`, []);
      await eventually(async () => (listening(row) ? true : undefined), 'the listener back', 10_000, 50);
      // Past the longest backoff, when every reconnect planned while it was down has come due: one listener, none beside it.
      await new Promise((resolve) => setTimeout(resolve, 2 * RECONNECT_MS.max));
      assert.equal(await connections(), 1, 'one LISTEN connection, no reconnect left open beside it');
    } finally {
      await cache.stop();
      await eventually(async () => ((await connections()) === 0 ? true : undefined), 'the listener closed', 5_000, 50);
      await sql(`drop role ${role}`, []);
    }
  });

  describe('through the API', () => {
    let apps: TestApp[];
    before(async () => {
      apps = [await startTestApp(), await startTestApp()];
      await Promise.all(apps.map((app) => app.deps.keyCache.start()));
    });
    after(async () => {
      await Promise.all(apps.map((app) => app.close()));
    });

    it('refuses on every app within a second a key revoked through one, although each had it cached', async () => {
      const org = await createTestOrganization('Key cache apps');
      const { secret, id } = await org.key(['custody:read']);
      for (const app of apps) {
        assert.equal((await app.request('GET', '/v1/api-keys/me', { key: secret })).status, 200);
        assert.ok(app.deps.keyCache.get(hashSecret(secret)), 'cached after its first use');
      }
      const revoked = await apps[0]!.request('DELETE', `/v1/api-keys/${id}`, { key: org.secret });
      assert.equal(revoked.status, 200);
      const revokedAt = Date.now();
      assert.equal((await apps[0]!.request('GET', '/v1/api-keys/me', { key: secret })).status, 401, 'at once on the revoking app');
      await eventually(async () => ((await apps[1]!.request('GET', '/v1/api-keys/me', { key: secret })).status === 401 ? true : undefined), 'the other app to refuse the key', 2_000, 10);
      assert.ok(Date.now() - revokedAt < 1_000, `refused within a second (${Date.now() - revokedAt} ms)`);
    });
  });
});
