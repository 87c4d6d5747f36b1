import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createApiKey } from '../../src/api-keys/service';
import { Event } from '../../src/events/entities';
import type { OrgRole } from '../../src/organizations/entities';
import { createMember, createOrganization } from '../../src/organizations/service';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { startTestApp, type TestApp } from '../support/app';
import { cli } from '../support/cli';
import { localTemporal, testOrm } from '../support/environment';
import { creditCustodyWallet } from '../support/ledger';
import { createTestWorker } from '../support/worker';

type Person = { id: string; secret: string };

/** An organization made as the operator makes one: members and their keys (scope *, sandbox), at the default count of one approval. */
async function organization(name: string, roles: Record<string, OrgRole>): Promise<{ id: string; people: Record<string, Person> }> {
  const em = (await testOrm()).em.fork();
  const org = createOrganization(em, `${name} ${randomUUID()}`);
  const people: Record<string, Person> = {};
  for (const [person, orgRole] of Object.entries(roles)) {
    const member = await createMember(em, org, { name: person, email: `${person.toLowerCase()}-${randomUUID()}@example.com`, org_role: orgRole });
    people[person] = { id: member.id, secret: createApiKey(em, { organization: org, name: `${person}'s key`, scopes: ['*'], environment: 'sandbox', member }).secret };
  }
  await em.flush();
  return { id: org.id, people };
}

const blockAll = { name: 'Block everything', action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };

/**
 * Issue 47, item 1: a change that loosens a control waits for the organization's quorum (a change
 * request, voted on as any approval request), one that tightens applies at once, and the governance
 * log names who asked and who approved: through the real API, Temporal workflows and PostgreSQL.
 */
describe('Governance: loosening needs the quorum, tightening is instant', () => {
  let app: TestApp;
  let worker: Worker;
  let running: Promise<void>;
  /** Olga asks (admin); Ada and Bob approve; Vic is a viewer. */
  let org: { id: string; people: Record<string, Person> };
  /** Another organization's approver. */
  let stranger: Person;

  before(async () => {
    const created = await createTestWorker(await localTemporal());
    worker = created.worker;
    running = worker.run();
    app = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: created.taskQueue } });
    org = await organization('Governance', { Olga: 'admin', Ada: 'approver', Bob: 'approver', Vic: 'viewer' });
    stranger = (await organization('Elsewhere', { Eve: 'approver' })).people.Eve!;
  });
  after(async () => {
    await app?.close();
    worker?.shutdown();
    await running;
  });

  const call = (method: string, path: string, who: Person, body?: unknown) => app.request(method, path, { key: who.secret, body });
  const people = () => org.people as Record<'Olga' | 'Ada' | 'Bob' | 'Vic', Person>;
  const events = async (type: string) => (await (await testOrm()).em.fork().find(Event, { organization: org.id, type }, { orderBy: { createdAt: 'asc', id: 'asc' } })).map((event) => event.data);
  const log = async (query = '') => {
    const page = await call('GET', `/v1/governance/log${query}`, people().Olga);
    assert.equal(page.status, 200, page.text);
    return page.body;
  };

  it('archiving an enforced policy waits for an independent approval (a send stays blocked); a block-only policy was enforced at once', async () => {
    const { Olga, Ada } = people();
    const vault = await call('POST', '/v1/vaults', Olga, { name: 'Treasury' });
    const wallet = await call('POST', '/v1/wallets', Olga, { name: 'Treasury ETH', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(wallet.status, 201, wallet.text);
    await creditCustodyWallet((await testOrm()).em.fork(), wallet.body.id, 'ETH', 10n ** 17n);
    const send = () => call('POST', '/v1/transactions', Olga, { wallet_id: wallet.body.id, to_address: privateKeyToAccount(generatePrivateKey()).address, amount: '0.001', asset: 'ETH' });

    // Tightening: a policy whose rules all block replaces nothing and needs nobody.
    const policy = await call('POST', '/v1/policies', Olga, { name: 'Freeze', rules: [blockAll] });
    const activated = await call('POST', `/v1/policies/${policy.body.id}/activate`, Olga, {});
    assert.deepEqual([activated.status, activated.body.status], [200, 'enforced'], activated.text);
    assert.equal((await send()).body.error?.code, 'policy_blocked');

    // Loosening: archiving it is a change request; meanwhile the policy holds.
    const archive = await call('DELETE', `/v1/policies/${policy.body.id}`, Olga);
    assert.equal(archive.status, 202, archive.text);
    assert.deepEqual(
      [archive.body.status, archive.body.policy_id, archive.body.kind, archive.body.required_approvals, archive.body.workflow_id],
      ['pending_authorization', policy.body.id, 'policy_archived', 1, `governance-change-${archive.body.approval_request_id}`],
    );
    assert.ok(Date.parse(archive.body.expires_at) > Date.now());
    const again = await call('DELETE', `/v1/policies/${policy.body.id}`, Olga);
    assert.deepEqual([again.status, again.body.error.code, again.body.error.details.approval_request_id], [409, 'change_pending', archive.body.approval_request_id]);
    assert.equal((await call('GET', `/v1/policies/${policy.body.id}`, Olga)).body.status, 'enforced');
    assert.equal((await send()).body.error?.code, 'policy_blocked', 'still blocked while the archive waits');
    const requestId: string = archive.body.approval_request_id;
    const request = await call('GET', `/v1/approval-requests/${requestId}`, Ada);
    assert.deepEqual([request.body.kind, request.body.governance_change_id, request.body.status], ['governance_change', archive.body.governance_change_id, 'pending']);

    // Another organization neither sees nor votes on it; the requester cannot vote on it.
    assert.equal((await call('GET', `/v1/approval-requests/${requestId}`, stranger)).status, 404);
    assert.equal((await call('POST', `/v1/approval-requests/${requestId}/approve`, stranger, {})).status, 404);
    assert.deepEqual((await app.request('GET', '/v1/governance/log', { key: stranger.secret })).body.data, []);
    assert.equal((await call('POST', `/v1/approval-requests/${requestId}/approve`, Olga, {})).body.error.code, 'requester_cannot_vote');

    const approved = await call('POST', `/v1/approval-requests/${requestId}/approve`, Ada, {});
    assert.deepEqual([approved.status, approved.body.status], [200, 'approved'], approved.text);
    assert.equal((await call('GET', `/v1/policies/${policy.body.id}`, Olga)).body.status, 'archived');
    assert.equal((await send()).status, 201, 'no enforced policy left: the send goes');

    const [requested] = await events('policy.change_requested');
    assert.deepEqual([requested!.kind, requested!.policy_id, requested!.approval_request_id], ['policy_archived', policy.body.id, requestId]);
    assert.deepEqual((await events('policy.archived')).map((data) => data.governance_change_id), [archive.body.governance_change_id]);
    assert.deepEqual((await events('approval_request.approved')).map((data) => data.id), [requestId]);

    const [archived, enforced] = (await log('?limit=2')).data;
    assert.deepEqual(
      [archived.kind, archived.status, archived.subject, archived.requested_by, archived.approval_request_id],
      ['policy_archived', 'applied', { policy_id: policy.body.id }, { type: 'user', id: Olga.id, name: 'Olga' }, requestId],
    );
    assert.deepEqual(archived.approvals.map((vote: { member_id: string; name: string }) => [vote.member_id, vote.name]), [[Ada.id, 'Ada']]);
    assert.ok(archived.applied_at >= archived.requested_at);
    assert.deepEqual([enforced.kind, enforced.status, enforced.approval_request_id, enforced.approvals, enforced.change.only_blocks], ['policy_activated', 'applied', null, [], true]);
  });

  it("a gas station's lowered limit applies at once; a raised one waits for approval while the rest of the PATCH applies", async () => {
    const { Olga, Bob } = people();
    const created = await call('POST', '/v1/gas-stations', Olga, { name: 'ETH gas', chain: 'ethereum', threshold: '0', daily_sponsorship_budget: '0.5', max_gas_price: '80' });
    assert.equal(created.status, 201, created.text);
    const path = `/v1/gas-stations/${created.body.id}`;

    const lowered = await call('PATCH', path, Olga, { daily_sponsorship_budget: '0.2', max_gas_price: '60' });
    assert.deepEqual([lowered.status, lowered.body.daily_sponsorship_budget, lowered.body.max_gas_price], [200, '0.2', '60'], lowered.text);

    const raised = await call('PATCH', path, Olga, { name: 'ETH fuel', daily_sponsorship_budget: '3', max_gas_price: '40' });
    assert.equal(raised.status, 202, raised.text);
    assert.equal(raised.body.kind, 'gas_station_limits_raised');
    assert.deepEqual(raised.body.change.limits, [{ field: 'daily_sponsorship_budget', from: '0.2', to: '3' }]);
    assert.deepEqual([raised.body.gas_station.name, raised.body.gas_station.daily_sponsorship_budget, raised.body.gas_station.max_gas_price], ['ETH fuel', '0.2', '40'], 'the rest applied, the raise not');
    assert.equal((await call('PATCH', path, Olga, { daily_sponsorship_budget: '4' })).body.error.code, 'change_pending');

    assert.equal((await call('POST', `/v1/approval-requests/${raised.body.approval_request_id}/approve`, Bob, {})).status, 200);
    assert.equal((await call('GET', path, Olga)).body.daily_sponsorship_budget, '3');
    // Asked in one request, the raise and the lowering may share a millisecond: compared as a set.
    const kinds = (await log('?limit=3')).data.map((entry: { kind: string; status: string }) => `${entry.kind} ${entry.status}`);
    assert.deepEqual(kinds.sort(), ['gas_station_limits_lowered applied', 'gas_station_limits_lowered applied', 'gas_station_limits_raised applied']);
  });

  it('organization settings: raising the count is instant, lowering it is a change request under the raised count; an approver waits, a viewer does not', async () => {
    const { Olga, Ada, Bob, Vic } = people();
    const settings = await call('GET', '/v1/organization/settings', Olga);
    assert.deepEqual(settings.body, { object: 'organization_settings', organization_id: org.id, policy_activation_required_approvals: 1, address_book_cooling_hours: { live: 24, sandbox: 0 } });
    assert.equal((await call('GET', '/v1/organization/settings', Vic)).status, 200, 'keys of scope * read it; the scope is api_keys:admin');

    const raised = await call('PATCH', '/v1/organization/settings', Olga, { policy_activation_required_approvals: 2, address_book_cooling_hours: { live: 48 } });
    assert.deepEqual([raised.status, raised.body.policy_activation_required_approvals, raised.body.address_book_cooling_hours.live], [200, 2, 48], raised.text);
    const both = await call('PATCH', '/v1/organization/settings', Olga, { policy_activation_required_approvals: 1, address_book_cooling_hours: { live: 1 } });
    assert.deepEqual([both.status, both.body.error.code], [400, 'one_loosening_per_request'], 'two loosenings are two requests');

    const lowered = await call('PATCH', '/v1/organization/settings', Olga, { policy_activation_required_approvals: 1, comment: 'back to one' });
    assert.deepEqual([lowered.status, lowered.body.kind, lowered.body.required_approvals, lowered.body.settings.policy_activation_required_approvals], [202, 'approvals_lowered', 2, 2], lowered.text);
    const vote = (who: Person) => call('POST', `/v1/approval-requests/${lowered.body.approval_request_id}/approve`, who, {});
    assert.equal((await vote(Ada)).body.status, 'pending', 'one approval of the two the count now asks');
    assert.equal((await call('GET', '/v1/organization/settings', Olga)).body.policy_activation_required_approvals, 2);
    assert.equal((await vote(Bob)).body.status, 'approved');
    assert.equal((await call('GET', '/v1/organization/settings', Olga)).body.policy_activation_required_approvals, 1);

    const viewer = await call('POST', '/v1/members', Olga, { name: 'Val', email: `val-${randomUUID()}@example.com`, org_role: 'viewer' });
    assert.equal(viewer.status, 201, viewer.text);
    const email = `ann-${randomUUID()}@example.com`;
    const approver = await call('POST', '/v1/members', Olga, { name: 'Ann', email, org_role: 'approver' });
    assert.deepEqual([approver.status, approver.body.kind], [202, 'approver_added'], approver.text);
    const listed = async () => (await call('GET', '/v1/members?limit=100', Olga)).body.data.map((member: { email: string }) => member.email);
    assert.ok(!(await listed()).includes(email), 'not a member before the approval');
    assert.equal((await call('POST', `/v1/approval-requests/${approver.body.approval_request_id}/approve`, Ada, {})).body.status, 'approved');
    assert.ok((await listed()).includes(email));

    const entries = (await log('?limit=1')).data;
    assert.deepEqual([entries[0].kind, entries[0].requested_by.name, entries[0].approvals[0].name], ['approver_added', 'Olga', 'Ada']);
    assert.match(entries[0].subject.member_id, /^[0-9a-f-]{36}$/);
    const lowering = (await log('?kind=approvals_lowered')).data[0];
    assert.deepEqual(lowering.approvals.map((entry: { name: string }) => entry.name).sort(), ['Ada', 'Bob']);
    assert.deepEqual(lowering.change.settings, [{ field: 'policy_activation_required_approvals', from: 2, to: 1 }]);
  });

  it('pages the log with a cursor and lists the operator\'s direct changes', async () => {
    const changed = async () => (await (await testOrm()).em.fork().find(Event, { organization: org.id, type: 'policy.changed' }, { orderBy: { createdAt: 'asc', id: 'asc' } })).filter((event) => event.data.kind === 'cooling_shortened');
    const before = (await changed()).length;
    await cli(['org:configure', '--org', org.id, '--address-book-cooling-hours', '6']);
    // Announced as the API's changes are, in both environments: the settings are organization-wide.
    const announced = (await changed()).slice(before);
    assert.deepEqual(announced.map((event) => event.environment).sort(), ['live', 'sandbox']);
    const first = await log('?limit=2');
    assert.deepEqual([first.object, first.data.length, first.has_more], ['list', 2, true]);
    assert.deepEqual([first.data[0].kind, first.data[0].requested_by], ['cooling_shortened', { type: 'operator', id: 'operator', name: 'operator' }]);
    const seen = [...first.data];
    for (let cursor = first.next_cursor; cursor; ) {
      const page = await log(`?limit=2&cursor=${cursor}`);
      seen.push(...page.data);
      cursor = page.next_cursor;
    }
    assert.equal(new Set(seen.map((entry) => entry.id)).size, seen.length, 'no entry twice');
    assert.ok(seen.length >= 9, `every change listed: ${seen.length}`);
    const forged = await call('GET', '/v1/governance/log?cursor=nonsense', people().Olga);
    assert.deepEqual([forged.status, forged.body.error.param], [400, 'cursor']);
  });

  it('revoking a key applies at once and is logged with who revoked it', async () => {
    const minted = await call('POST', '/v1/api-keys', people().Olga, { name: 'Olga, batch jobs', scopes: ['custody:read'] });
    assert.equal(minted.status, 201, minted.text);
    const revoked = await call('DELETE', `/v1/api-keys/${minted.body.id}`, people().Olga);
    assert.equal(revoked.status, 200, revoked.text);
    assert.equal((await app.request('GET', '/v1/wallets', { key: minted.body.secret })).status, 401);
    const [entry] = (await log('?kind=api_key_revoked')).data;
    assert.deepEqual(
      { kind: entry.kind, status: entry.status, environment: entry.environment, subject: entry.subject, requested_by: entry.requested_by.name, approvals: entry.approvals },
      { kind: 'api_key_revoked', status: 'applied', environment: 'sandbox', subject: { api_key_id: minted.body.id }, requested_by: 'Olga', approvals: [] },
    );
  });
});

