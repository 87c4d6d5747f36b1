import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ApiKey } from '../../src/api-keys/entities';
import { createApiKey } from '../../src/api-keys/service';
import { Organization } from '../../src/organizations/entities';
import { createMember } from '../../src/organizations/service';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
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
    const created = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
      body: { name: 'Reporting', scopes: ['cards:read', 'lightning:read'] },
    });
    assert.equal(created.status, 201);
    assert.equal(created.body.object, 'api_key');
    assert.match(created.body.secret, /^sk_test_[0-9A-Za-z]{32}$/);
    assert.equal(created.body.organization_id, org.organizationId);
    assert.deepEqual(created.body.scopes, ['cards:read', 'lightning:read']);
    assert.equal(created.body.api_version, '2026-05-15');
    assert.equal(created.body.last_used_at, undefined, 'absent until first used');

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

  /** An owner with a key acting for them, made by the operator (as `member:create` and `key:create --user-id` do). */
  async function ownerKey(): Promise<{ secret: string; memberId: string; keyId: string }> {
    const em = (await testOrm()).em.fork();
    const organization = em.getReference(Organization, org.organizationId);
    const owner = await createMember(em, organization, { name: 'Owner', email: `owner-${randomUUID()}@example.com`, org_role: 'owner' });
    const { key, secret } = createApiKey(em, { organization, name: 'Owner key', scopes: ['*'], environment: 'sandbox', member: owner });
    await em.flush();
    return { secret, memberId: owner.id, keyId: key.id };
  }

  it('pins a key to the requested api_version and binds it to a member, when an owner mints it', async () => {
    const owner = await ownerKey();
    const member = await app.request('POST', '/v1/members', {
      key: owner.secret,
      body: { name: 'Ada', email: `ada-${Date.now()}@example.com`, org_role: 'viewer' },
    });
    assert.equal(member.status, 201);
    const created = await app.request('POST', '/v1/api-keys', {
      key: owner.secret,
      body: { name: 'Ada key', scopes: ['policies:approve', 'api_keys:admin'], api_version: '2026-02-28', user_id: member.body.id },
    });
    assert.equal(created.status, 201);
    assert.equal(created.body.user_id, member.body.id);
    const me = await app.request('GET', '/v1/api-keys/me', { key: created.body.secret });
    assert.equal(me.headers.get('api-version'), '2026-02-28');
    const stored = await (await testOrm()).em.fork().findOneOrFail(ApiKey, { id: created.body.id });
    assert.deepEqual([stored.createdByKeyId, stored.createdByMemberId], [owner.keyId, owner.memberId], 'who minted it is recorded');

    // A key acting for a member can mint another key for that same member, not for anyone else.
    const again = await app.request('POST', '/v1/api-keys', { key: created.body.secret, body: { name: 'Ada 2', scopes: ['policies:approve'], user_id: member.body.id } });
    assert.equal(again.status, 201, again.text);
    const forOwner = await app.request('POST', '/v1/api-keys', { key: created.body.secret, body: { name: 'x', scopes: ['policies:approve'], user_id: owner.memberId } });
    assert.deepEqual([forOwner.status, forOwner.body.error.code], [403, 'member_binding_forbidden']);

    const stranger = await app.request('POST', '/v1/api-keys', {
      key: owner.secret,
      body: { name: 'x', scopes: ['cards:read'], user_id: '00000000-0000-4000-8000-000000000000' },
    });
    assert.equal(stranger.status, 404);
    assert.equal(stranger.body.error.param, 'user_id');
  });

  it('never lets a key that acts for no member mint a key acting for one, whatever its scopes', async () => {
    const member = await app.request('POST', '/v1/members', { key: org.secret, body: { name: 'Bea', email: `bea-${randomUUID()}@example.com`, org_role: 'viewer' } });
    assert.equal(member.status, 201, 'an admin key may still add members (one who can vote: through a change request)');
    const refused = await app.request('POST', '/v1/api-keys', { key: org.secret, body: { name: 'Bea key', scopes: ['policies:approve'], user_id: member.body.id } });
    assert.deepEqual([refused.status, refused.body.error.code, refused.body.error.details.user_id], [403, 'member_binding_forbidden', member.body.id]);
    const unbound = await app.request('POST', '/v1/api-keys', { key: org.secret, body: { name: 'Unbound', scopes: ['cards:read'] } });
    assert.equal(unbound.status, 201);
    const stored = await (await testOrm()).em.fork().findOneOrFail(ApiKey, { id: unbound.body.id });
    assert.deepEqual([stored.createdByKeyId, stored.createdByMemberId], [org.apiKeyId, null]);
  });

  it('refuses to grant scopes or an environment the calling key does not have', async () => {
    const { secret } = await org.key(['api_keys:admin', 'cards:read']);
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
    const created = await app.request('POST', '/v1/api-keys', { key: liveOrg.secret, body: { name: 'x', scopes: ['cards:read'] } });
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
