import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ApiKey } from '../../src/api-keys/entities';
import { createTestOrganization, operatorMember, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

describe('API keys', () => {
  let app: TestApp;
  let org: TestOrganization;

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization();
  });
  after(() => app?.close());

  it('creates a key whose secret is shown once and stored only as a hash', async () => {
    const owner = await operatorMember(org.organizationId);
    const created = await app.request('POST', '/v1/api-keys', {
      key: owner.secret,
      body: { name: 'Reporting', scopes: ['cards:read', 'lightning:read'] },
    });
    assert.equal(created.status, 201);
    assert.equal(created.body.object, 'api_key');
    assert.match(created.body.secret, /^sk_test_[0-9A-Za-z]{32}$/);
    assert.equal(created.body.organization_id, org.organizationId);
    assert.deepEqual(created.body.scopes, ['cards:read', 'lightning:read']);
    assert.equal(created.body.api_version, '2026-05-15');
    assert.equal(created.body.last_used_at, undefined, 'absent until first used');
    assert.deepEqual([created.body.user_id, created.body.status], [owner.memberId, 'active'], "it acts for the minter's member");

    const stored = await (await testOrm()).em.fork().findOneOrFail(ApiKey, { id: created.body.id });
    assert.notEqual(stored.secretHash, created.body.secret);
    assert.ok(!JSON.stringify(stored).includes(created.body.secret));

    const listed = await app.request('GET', '/v1/api-keys', { key: org.secret });
    const entry = listed.body.data.find((key: { id: string }) => key.id === created.body.id);
    assert.ok(entry);
    assert.equal(entry.secret, undefined);
    assert.equal(entry.redacted_secret, `sk_test_...${created.body.secret.slice(-4)}`);

    const me = await app.request('GET', '/v1/api-keys/me', { key: created.body.secret });
    assert.equal(me.status, 200);
    assert.equal(me.body.id, created.body.id);
    assert.equal(me.body.name, 'Reporting');
    assert.equal(me.body.secret, undefined);
    assert.ok(Date.parse(me.body.last_used_at) > Date.parse(created.body.created_at) - 1000);
  });

  it('keeps last_used_at current without writing on every request', async () => {
    const { secret, id } = await org.key(['cards:read']);
    const em = (await testOrm()).em.fork();
    const first = await app.request('GET', '/v1/api-keys/me', { key: secret });
    const storedAfterFirst = (await em.fork().findOneOrFail(ApiKey, { id })).lastUsedAt;
    assert.ok(storedAfterFirst, 'the first use is written');
    assert.equal(first.body.last_used_at, storedAfterFirst.toISOString());
    await app.request('GET', '/v1/api-keys/me', { key: secret });
    const storedAfterSecond = (await em.fork().findOneOrFail(ApiKey, { id })).lastUsedAt;
    assert.equal(storedAfterSecond?.toISOString(), storedAfterFirst.toISOString(), 'no second write within the resolution window');
  });

  it('pins a key to the requested api_version and binds it to another member, who confirms it, when an owner mints it', async () => {
    const owner = await operatorMember(org.organizationId);
    const ada = await operatorMember(org.organizationId, { name: 'Ada', orgRole: 'approver', scopes: ['api_keys:admin', 'policies:approve'] });
    const created = await app.request('POST', '/v1/api-keys', {
      key: owner.secret,
      body: { name: 'Ada key', scopes: ['policies:approve', 'api_keys:admin'], api_version: '2026-02-28', user_id: ada.memberId },
    });
    assert.equal(created.status, 201);
    assert.deepEqual([created.body.user_id, created.body.status], [ada.memberId, 'pending_confirmation']);
    assert.equal((await app.request('POST', `/v1/api-keys/${created.body.id}/confirm`, { key: ada.secret })).status, 200);
    const me = await app.request('GET', '/v1/api-keys/me', { key: created.body.secret });
    assert.equal(me.headers.get('api-version'), '2026-02-28');
    const stored = await (await testOrm()).em.fork().findOneOrFail(ApiKey, { id: created.body.id });
    assert.deepEqual([stored.createdByKeyId, stored.createdByMemberId, stored.confirmedByKeyId], [owner.keyId, owner.memberId, ada.keyId], 'who minted and who confirmed it are recorded');

    // A key acting for a member that is not an owner mints keys for that same member only.
    const again = await app.request('POST', '/v1/api-keys', { key: created.body.secret, body: { name: 'Ada 2', scopes: ['policies:approve'] } });
    assert.deepEqual([again.status, again.body.user_id, again.body.status], [201, ada.memberId, 'active'], again.text);
    const forOwner = await app.request('POST', '/v1/api-keys', { key: created.body.secret, body: { name: 'x', scopes: ['policies:approve'], user_id: owner.memberId } });
    assert.deepEqual([forOwner.status, forOwner.body.error.code], [403, 'member_binding_forbidden']);

    const stranger = await app.request('POST', '/v1/api-keys', {
      key: owner.secret,
      body: { name: 'x', scopes: ['cards:read'], user_id: '00000000-0000-4000-8000-000000000000' },
    });
    assert.equal(stranger.status, 404);
    assert.equal(stranger.body.error.param, 'user_id');
  });

  it('never lets a key that acts for no member mint a key, whatever its scopes', async () => {
    const member = await app.request('POST', '/v1/members', { key: org.secret, body: { name: 'Bea', email: `bea-${randomUUID()}@example.com`, org_role: 'viewer' } });
    assert.equal(member.status, 201, 'an admin key may still add members (one who can vote: through a change request)');
    for (const body of [{ user_id: member.body.id }, {}]) {
      const refused = await app.request('POST', '/v1/api-keys', { key: org.secret, body: { name: 'Bea key', scopes: ['policies:approve'], ...body } });
      assert.deepEqual([refused.status, refused.body.error.code], [403, 'member_required'], refused.text);
    }
  });

  it('shows and revokes only keys of the calling key\'s environment', async () => {
    const sandbox = await operatorMember(org.organizationId, { name: 'Sandy', scopes: ['api_keys:admin'] });
    const live = await operatorMember(org.organizationId, { name: 'Liv', scopes: ['api_keys:admin'], environment: 'live' });
    for (const [caller, theirs] of [[sandbox, live], [live, sandbox]] as const) {
      const listed = await app.request('GET', '/v1/api-keys?limit=100', { key: caller.secret });
      assert.equal(listed.status, 200);
      const environments = new Set(listed.body.data.map((key: { environment: string }) => key.environment));
      assert.deepEqual([...environments], [caller === live ? 'live' : 'sandbox'], 'the other environment is not listed');
      for (const path of [`/v1/api-keys/${theirs.keyId}`, `/v1/api-keys/${theirs.keyId}/confirm`]) {
        const touched = await app.request(path.endsWith('/confirm') ? 'POST' : 'DELETE', path, { key: caller.secret });
        assert.deepEqual([touched.status, touched.body.error?.code], [404, 'resource_missing'], `${path}: ${touched.text}`);
      }
      assert.equal((await app.request('GET', '/v1/api-keys/me', { key: theirs.secret })).status, 200, 'still valid');
    }
  });

  it('refuses to grant scopes or an environment the calling key does not have', async () => {
    const { secret } = await operatorMember(org.organizationId, { name: 'Narrow', scopes: ['api_keys:admin', 'cards:read'] });
    const escalate = await app.request('POST', '/v1/api-keys', { key: secret, body: { name: 'x', scopes: ['cards:secure'] } });
    assert.equal(escalate.status, 403);
    assert.equal(escalate.body.error.code, 'scope_escalation');
    const star = await app.request('POST', '/v1/api-keys', { key: secret, body: { name: 'x', scopes: ['*'] } });
    assert.equal(star.status, 403);
    const subset = await app.request('POST', '/v1/api-keys', { key: secret, body: { name: 'x', scopes: ['cards:read'] } });
    assert.equal(subset.status, 201);
    const live = await app.request('POST', '/v1/api-keys', { key: org.secret, body: { name: 'x', scopes: ['cards:read'], environment: 'live' } });
    assert.equal(live.status, 403);
    assert.equal(live.body.error.code, 'environment_escalation');
  });

  it('creates live keys from a live key, with the sk_live_ prefix', async () => {
    const liveOrg = await createTestOrganization('Live org', 'live');
    const liveOwner = await operatorMember(liveOrg.organizationId, { environment: 'live' });
    const created = await app.request('POST', '/v1/api-keys', { key: liveOwner.secret, body: { name: 'x', scopes: ['cards:read'] } });
    assert.equal(created.status, 201);
    assert.equal(created.body.environment, 'live');
    assert.match(created.body.secret, /^sk_live_/);
  });

  it("answers 404 for another organization's key, and never touches it", async () => {
    const other = await createTestOrganization('Other org');
    const theirs = await other.key(['cards:read']);
    const get = await app.request('DELETE', `/v1/api-keys/${theirs.id}`, { key: org.secret });
    assert.equal(get.status, 404);
    assert.equal(get.body.error.code, 'resource_missing');
    assert.equal((await app.request('GET', '/v1/api-keys/me', { key: theirs.secret })).status, 200, 'still valid');
    const list = await app.request('GET', '/v1/api-keys?limit=100', { key: org.secret });
    assert.ok(list.body.data.every((key: { organization_id: string }) => key.organization_id === org.organizationId));
  });

  it('revokes a key: it stops authenticating and leaves the list', async () => {
    const { secret, id } = await org.key(['cards:read']);
    const revoked = await app.request('DELETE', `/v1/api-keys/${id}`, { key: org.secret });
    assert.equal(revoked.status, 200);
    assert.ok(revoked.body.revoked_at);
    assert.equal((await app.request('GET', '/v1/api-keys/me', { key: secret })).status, 401);
    assert.equal((await app.request('DELETE', `/v1/api-keys/${id}`, { key: org.secret })).status, 404);
  });

  it('paginates 45 keys with cursors, newest first, without gaps or repeats', async () => {
    const paged = await createTestOrganization('Paged org');
    for (let i = 0; i < 45; i += 1) await paged.key(['cards:read']);
    const seen: string[] = [];
    let cursor: string | null = null;
    const sizes: number[] = [];
    do {
      const query: string = cursor ? `?limit=20&cursor=${encodeURIComponent(cursor)}` : '?limit=20';
      const page = await app.request('GET', `/v1/api-keys${query}`, { key: paged.secret });
      assert.equal(page.status, 200);
      assert.equal(page.body.object, 'list');
      sizes.push(page.body.data.length);
      seen.push(...page.body.data.map((key: { id: string }) => key.id));
      const created = page.body.data.map((key: { created_at: string }) => key.created_at);
      assert.deepEqual(created, [...created].sort().reverse(), 'newest first');
      assert.equal(page.body.has_more, page.body.next_cursor !== null);
      cursor = page.body.next_cursor;
    } while (cursor);
    assert.deepEqual(sizes, [20, 20, 6], '45 keys plus the root key');
    assert.equal(new Set(seen).size, 46);
    assert.ok(seen.includes(paged.apiKeyId));

    const defaultPage = await app.request('GET', '/v1/api-keys', { key: paged.secret });
    assert.equal(defaultPage.body.data.length, 20, 'default limit is 20');
    const badCursor = await app.request('GET', '/v1/api-keys?cursor=not-a-cursor', { key: paged.secret });
    assert.equal(badCursor.status, 400);
    assert.equal(badCursor.body.error.param, 'cursor');
  });
});
