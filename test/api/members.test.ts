import assert from 'node:assert/strict';
import { Member } from '../../src/organizations/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';

describe('Members and roles', () => {
  let app: TestApp;
  let org: TestOrganization;

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization();
    // Adding an approver is a governance change (test/api/governance.test.ts): with no approvals required it applies at once.
    await setRequiredApprovals(org.organizationId, 0);
  });
  after(() => app?.close());

  it('adds members, groups them in the built-in role of their org_role and counts them', async () => {
    const grace = await app.request('POST', '/v1/members', {
      key: org.secret,
      body: { name: 'Grace', email: 'Grace@Example.com', org_role: 'approver' },
    });
    assert.equal(grace.status, 201);
    assert.equal(grace.body.object, 'member');
    assert.equal(grace.body.email, 'grace@example.com');
    assert.equal(grace.body.org_role, 'approver');
    assert.equal(grace.body.role_ids.length, 1);

    await app.request('POST', '/v1/members', { key: org.secret, body: { name: 'Alan', email: 'alan@example.com', org_role: 'approver' } });
    await app.request('POST', '/v1/members', { key: org.secret, body: { name: 'Linus', email: 'linus@example.com', org_role: 'admin' } });

    const roles = await app.request('GET', '/v1/roles', { key: org.secret });
    assert.equal(roles.status, 200);
    const byName = Object.fromEntries(roles.body.data.map((role: { name: string; member_count: number }) => [role.name, role]));
    assert.deepEqual(Object.keys(byName).sort(), ['admin', 'approver', 'owner', 'viewer']);
    assert.equal(byName.approver.member_count, 2);
    assert.equal(byName.admin.member_count, 1);
    assert.equal(byName.viewer.member_count, 0);
    assert.equal(byName.approver.id, grace.body.role_ids[0]);

    const members = await app.request('GET', '/v1/members', { key: org.secret });
    assert.deepEqual(members.body.data.map((member: { name: string }) => member.name), ['Linus', 'Alan', 'Grace']);
  });

  it('refuses a duplicate email with 409 and bad input with validation_failed', async () => {
    const body = { name: 'Dup', email: 'dup@example.com', org_role: 'viewer' };
    assert.equal((await app.request('POST', '/v1/members', { key: org.secret, body })).status, 201);
    const duplicate = await app.request('POST', '/v1/members', { key: org.secret, body });
    assert.equal(duplicate.status, 409);
    assert.equal(duplicate.body.error.code, 'member_exists');

    const badRole = await app.request('POST', '/v1/members', { key: org.secret, body: { ...body, email: 'x@example.com', org_role: 'god' } });
    assert.equal(badRole.status, 400);
    assert.equal(badRole.body.error.param, 'org_role');
    const unknownRole = await app.request('POST', '/v1/members', {
      key: org.secret,
      body: { ...body, email: 'y@example.com', role_ids: ['role_missing'] },
    });
    assert.equal(unknownRole.status, 404);
    assert.equal(unknownRole.body.error.param, 'role_ids');
  });

  it('records which key, acting for which member, added a member', async () => {
    const { secret, id } = await org.key(['api_keys:admin']);
    const added = await app.request('POST', '/v1/members', { key: secret, body: { name: 'Traced', email: 'traced@example.com', org_role: 'approver' } });
    assert.equal(added.status, 201);
    const stored = await (await testOrm()).em.fork().findOneOrFail(Member, { id: added.body.id });
    assert.deepEqual([stored.createdByKeyId, stored.createdByMemberId], [id, null]);
  });

  it("keeps each organization's members to itself", async () => {
    const other = await createTestOrganization('Other');
    const list = await app.request('GET', '/v1/members', { key: other.secret });
    assert.deepEqual(list.body.data, []);
  });
});
