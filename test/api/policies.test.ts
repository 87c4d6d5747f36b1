import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { DomainError } from '../../src/shared/errors';
import { httpStatus } from '../../src/http/errors';
import type { Environment } from '../../src/api-keys/entities';
import { createApiKey } from '../../src/api-keys/service';
import { Member, Organization, type OrgRole } from '../../src/organizations/entities';
import { createMember, type MemberCreator } from '../../src/organizations/service';
import { Event } from '../../src/events/entities';
import { PolicyAuditLog } from '../../src/policies/entities';
import { decideTransaction } from '../../src/policies/decisions';
import type { PolicyActor } from '../../src/policies/service';
import { createTestOrganization, operatorMember, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { createTestWorker } from '../support/worker';

const blockAbove = (value: string) => ({ name: `Block above ${value}`, action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than', value }] });
const allowRest = { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };

describe('Policies API', () => {
  let app: TestApp;
  let worker: Worker;
  let running: Promise<void>;
  let org: TestOrganization;

  before(async () => {
    const created = await createTestWorker(await localTemporal());
    worker = created.worker;
    running = worker.run();
    app = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: created.taskQueue } });
    org = await createTestOrganization();
  });
  after(async () => {
    await app?.close();
    worker?.shutdown();
    await running;
  });

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });

  /** An owner and a key acting for them, made by the operator (as `member:create` and `key:create --user-id` do). */
  async function ownerKey(o: TestOrganization, environment: Environment = 'sandbox'): Promise<{ secret: string; id: string; keyId: string }> {
    const em = (await testOrm()).em.fork();
    const organization = em.getReference(Organization, o.organizationId);
    const owner = await createMember(em, organization, { name: `Owner ${environment}`, email: `owner-${randomUUID()}@example.com`, org_role: 'owner' });
    const { key, secret } = createApiKey(em, { organization, name: 'Owner key', scopes: ['*'], environment, member: owner });
    await em.flush();
    return { secret, id: owner.id, keyId: key.id };
  }

  /**
   * A member as `creator` adds one through POST /v1/members: at once for a viewer, once its change
   * request is approved for a member who can vote (tests/api/governance.test.ts); traced to that key
   * and member either way.
   */
  async function addedMember(o: TestOrganization, creator: MemberCreator, name: string, orgRole: OrgRole): Promise<string> {
    const em = (await testOrm()).em.fork();
    const member = await createMember(em, em.getReference(Organization, o.organizationId), { name, email: `${name.toLowerCase()}-${randomUUID()}@example.com`, org_role: orgRole }, creator);
    await em.flush();
    return member.id;
  }

  /** A member the operator added, with a key the operator made for them (their votes count: docs/policies.md, "Keys and people"). */
  async function memberKey(o: TestOrganization, name: string, orgRole: OrgRole, scopes = ['*'], environment: Environment = 'sandbox'): Promise<{ secret: string; id: string }> {
    const { secret, memberId } = await operatorMember(o.organizationId, { name, orgRole, scopes, environment });
    return { secret, id: memberId };
  }

  async function createPolicy(body: Record<string, unknown>, key = org.secret) {
    const response = await call('POST', '/v1/policies', body, key);
    assert.equal(response.status, 201, JSON.stringify(response.body));
    return response.body;
  }

  async function setRequiredApprovals(o: TestOrganization, count: number) {
    const em = (await testOrm()).em.fork();
    await em.nativeUpdate(Organization, { id: o.organizationId }, { policyActivationRequiredApprovals: count });
  }

  it('publishes the schema, templates and approver candidates', async () => {
    const schema = await call('GET', '/v1/policies/schema');
    assert.equal(schema.status, 200);
    assert.equal(schema.body.object, 'policy_schema');
    const fields = Object.fromEntries(schema.body.condition_fields.map((f: { name: string }) => [f.name, f]));
    assert.equal(fields.amount.value_type, 'decimal');
    assert.ok(fields.velocity_amount_usd_24h && fields.velocity_count_1h);
    assert.ok(fields.to_address.valid_operators.includes('contains'));
    const approval = schema.body.action_types.find((a: { value: string }) => a.value === 'require_approval');
    assert.deepEqual(Object.keys(approval.config_schema.properties).sort(), ['approvers', 'expiry_hours', 'required_approvals']);
    assert.equal(schema.body.operators.find((o: { name: string }) => o.name === 'between').arity, 2);

    const templates = await call('GET', '/v1/policy-templates');
    assert.deepEqual(templates.body.data.map((t: { id: string }) => t.id), ['tmpl_block_above_amount', 'tmpl_approval_above_amount', 'tmpl_destination_whitelist', 'tmpl_velocity_cap']);
    assert.ok(templates.body.data.every((t: { is_template: boolean; rules: unknown[] }) => t.is_template && t.rules.length > 0));

    await memberKey(org, 'Candidate', 'approver');
    const candidates = await call('GET', '/v1/policies/approver-candidates');
    const user = candidates.body.data.find((c: { name: string }) => c.name === 'Candidate');
    assert.deepEqual([user.type, user.org_role, user.votes_on_your_activations], ['user', 'approver', true]);
    // A member the caller adds may be named as an approver, but not vote on the caller's own requests: the listing says so.
    const added = await addedMember(org, { apiKeyId: org.apiKeyId, memberId: null }, 'Added by the caller', 'approver');
    const listed = (await call('GET', '/v1/policies/approver-candidates')).body.data.find((c: { id: string }) => c.id === added);
    assert.equal(listed.votes_on_your_activations, false);
    const role = candidates.body.data.find((c: { type: string; name: string }) => c.type === 'role' && c.name === 'approver');
    assert.ok(role.member_count >= 1);
  });

  it('creates from a template with the approver role filled in, and the copy validates', async () => {
    const policy = await createPolicy({ template_id: 'tmpl_approval_above_amount' });
    assert.equal(policy.template_id, 'tmpl_approval_above_amount');
    assert.equal(policy.rule_count, 2);
    const approverId = policy.rules[0].action_config.approvers[0].id;
    assert.match(approverId, /^role_/);
    const validation = await call('POST', `/v1/policies/${policy.id}/validate`);
    assert.equal(validation.status, 200);
    assert.equal(validation.body.object, 'policy_validation');
    assert.equal(validation.body.diagnostics.find((d: { code: string }) => d.code === 'approvers_unknown'), undefined);
    assert.equal((await call('POST', '/v1/policies', { template_id: 'tmpl_nope' })).status, 404);
  });

  it('keeps rule order dense on insert, move and delete, and expands rules on request', async () => {
    const policy = await createPolicy({ name: 'Ordering', rules: [blockAbove('100'), allowRest] });
    assert.equal(policy.status, 'draft');
    assert.equal(policy.is_active, false);
    assert.equal(policy.category, 'access');
    const inserted = await call('POST', `/v1/policies/${policy.id}/rules`, { ...blockAbove('50'), name: 'First', order: 1 });
    assert.equal(inserted.status, 201);
    const names = async () => (await call('GET', `/v1/policies/${policy.id}?expand=rules`)).body.rules.map((r: { name: string; order: number }) => `${r.order}:${r.name}`);
    assert.deepEqual(await names(), ['1:First', '2:Block above 100', '3:Allow the rest']);
    const moved = await call('PATCH', `/v1/policies/${policy.id}/rules/${inserted.body.id}`, { order: 3, name: 'Moved' });
    assert.equal(moved.status, 200);
    assert.deepEqual(await names(), ['1:Block above 100', '2:Allow the rest', '3:Moved']);
    const removed = await call('DELETE', `/v1/policies/${policy.id}/rules/${policy.rules[0].id}`);
    assert.equal(removed.body.rule_count, 2);
    assert.deepEqual(await names(), ['1:Allow the rest', '2:Moved']);
    assert.equal((await call('GET', `/v1/policies/${policy.id}`)).body.rules, undefined);
    const badConfig = await call('PATCH', `/v1/policies/${policy.id}/rules/${inserted.body.id}`, { action_type: 'delay' });
    assert.equal(badConfig.status, 400);
    assert.equal(badConfig.body.error.param, 'action_config');
    const patched = await call('PATCH', `/v1/policies/${policy.id}`, { name: 'Renamed', priority: 5 });
    assert.deepEqual([patched.body.name, patched.body.priority], ['Renamed', 5]);
    const badField = await call('POST', `/v1/policies/${policy.id}/rules`, { name: 'Bad', action_type: 'allow', conditions: [{ field: 'colour', operator: 'equal', value: 'x' }] });
    assert.equal(badField.status, 400);
    const list = await call('GET', '/v1/policies?limit=100');
    assert.ok(list.body.data.some((p: { id: string }) => p.id === policy.id));
  });

  it('validates a draft with diagnostics, never an error', async () => {
    const result = await call('POST', '/v1/policies/validate', {
      rules: [
        { action_type: 'allow', name: 'Open', conditions: [] },
        { action_type: 'block', name: 'Never reached', conditions: [{ field: 'amount', operator: 'greater_than', value: 'ten' }] },
      ],
    });
    assert.equal(result.status, 200);
    const codes = result.body.diagnostics.map((d: { code: string }) => d.code).sort();
    assert.deepEqual(codes, ['empty_conditions', 'no_catch_all', 'unreachable_rule', 'value_type_mismatch']);
    assert.equal(result.body.valid, false);
    assert.deepEqual(result.body.issue_count, { error: 2, warning: 1, info: 1 });
    assert.equal(result.body.diagnostics.find((d: { code: string }) => d.code === 'empty_conditions').severity, 'error');
    const unreachable = await call('POST', '/v1/policies/validate', {
      rules: [{ action_type: 'allow', conditions: [] }, { action_type: 'block', conditions: [{ field: 'chain', operator: 'equal', value: 'tron' }] }],
    });
    assert.deepEqual(unreachable.body.diagnostics.map((d: { code: string; rule_index: number }) => `${d.code}@${d.rule_index}`), ['empty_conditions@0', 'unreachable_rule@1', 'no_catch_all@1']);
  });

  it('evaluates a draft by id with a trace, and refuses to activate a policy with errors', async () => {
    const policy = await createPolicy({ name: 'Dry run', rules: [blockAbove('0.3'), { ...allowRest, name: 'Allow the rest' }] });
    const blocked = await call('POST', '/v1/policies/evaluate', { policy_id: policy.id, amount: '0.31' });
    assert.equal(blocked.status, 200);
    assert.deepEqual([blocked.body.result, blocked.body.allowed, blocked.body.rule_id], ['rejected', false, policy.rules[0].id]);
    const exact = await call('POST', '/v1/policies/evaluate', { policy_id: policy.id, amount: '0.30' });
    assert.deepEqual([exact.body.result, exact.body.allowed], ['matched_rule', true]);
    assert.deepEqual(exact.body.trace[0].failed_condition, { field: 'amount', operator: 'greater_than', expected: '0.3', actual: '0.30' });
    const bad = await call('POST', '/v1/policies/evaluate', { amount: '1e3' });
    assert.equal(bad.status, 400);

    const broken = await createPolicy({ name: 'Broken', rules: [{ name: 'Empty', action_type: 'allow' }] });
    const refused = await call('POST', `/v1/policies/${broken.id}/activate`, {});
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, 'policy_invalid');
    assert.equal(refused.body.error.details.diagnostics[0].code, 'empty_conditions');
    // One severity per diagnostic: validating the draft, stored or not, reports what activation refuses.
    const stored = await call('POST', `/v1/policies/${broken.id}/validate`);
    const unstored = await call('POST', '/v1/policies/validate', { rules: [{ name: 'Empty', action_type: 'allow' }] });
    const severities = (body: { diagnostics: { code: string; severity: string }[] }) => body.diagnostics.map((d) => `${d.code}:${d.severity}`);
    for (const validation of [stored.body, unstored.body]) {
      assert.equal(validation.valid, false);
      assert.deepEqual(severities(validation), severities(refused.body.error.details));
    }
  });

  it('enforces at once when the organization requires no approvals; an enforced policy cannot be edited, a copy replaces it', async () => {
    const o = await createTestOrganization('No approvals');
    await setRequiredApprovals(o, 0);
    const policy = await createPolicy({ name: 'Limits', rules: [blockAbove('100'), allowRest] }, o.secret);
    const activated = await call('POST', `/v1/policies/${policy.id}/activate`, { comment: 'go' }, o.secret);
    assert.equal(activated.status, 200);
    assert.deepEqual([activated.body.status, activated.body.is_active], ['enforced', true]);

    const edit = await call('PATCH', `/v1/policies/${policy.id}`, { name: 'Changed' }, o.secret);
    assert.equal(edit.status, 409);
    assert.equal(edit.body.error.code, 'policy_enforced');
    assert.equal((await call('POST', `/v1/policies/${policy.id}/rules`, allowRest, o.secret)).status, 409);
    assert.equal((await call('POST', `/v1/policies/${policy.id}/activate`, {}, o.secret)).body.error.code, 'invalid_state_transition');

    const evaluated = await call('POST', '/v1/policies/evaluate', { amount: '150' }, o.secret);
    assert.equal(evaluated.body.result, 'rejected');

    const copy = await createPolicy({ source_policy_id: policy.id }, o.secret);
    assert.equal(copy.source_policy_id, policy.id);
    await call('PATCH', `/v1/policies/${copy.id}/rules/${copy.rules[0].id}`, { conditions: [{ field: 'amount', operator: 'greater_than', value: '1000' }] }, o.secret);
    const simulation = await call('POST', `/v1/policies/${copy.id}/simulate`, { requests: [{ amount: '150' }, { amount: '5000' }, { amount: '1' }, {}] }, o.secret);
    assert.equal(simulation.status, 200);
    assert.deepEqual([simulation.body.total, simulation.body.allowed, simulation.body.blocked, simulation.body.changed_from_current], [4, 2, 2, 1]);
    assert.equal(simulation.body.examples.blocked[0].index, 1);

    assert.equal((await call('POST', `/v1/policies/${copy.id}/activate`, {}, o.secret)).status, 200);
    assert.equal((await call('GET', `/v1/policies/${policy.id}`, undefined, o.secret)).body.status, 'archived');
    assert.equal((await call('POST', '/v1/policies/evaluate', { amount: '150' }, o.secret)).body.result, 'matched_rule');

    const audit = await call('GET', `/v1/policies/${policy.id}/audit-logs`, undefined, o.secret);
    assert.deepEqual(audit.body.data.map((e: { action: string }) => e.action), ['archived', 'activated', 'created']);
    assert.equal(audit.body.data[2].actor_name, 'Root key');

    const archived = await call('DELETE', `/v1/policies/${copy.id}`, undefined, o.secret);
    assert.equal(archived.body.status, 'archived');
    assert.equal((await call('POST', '/v1/policies/evaluate', { amount: '150' }, o.secret)).body.result, 'no_match');
  });

  it('activates through approvals: pending response, votes by members, requester refused, enforced on the last approval', async () => {
    const o = await createTestOrganization('Approvals');
    await setRequiredApprovals(o, 2);
    const requester = await memberKey(o, 'Requester', 'admin', ['policies:write', 'policies:approve']);
    const ada = await memberKey(o, 'Ada', 'approver', ['policies:approve']);
    const bob = await memberKey(o, 'Bob', 'owner', ['policies:approve']);
    const viewer = await memberKey(o, 'Vic', 'viewer', ['policies:approve']);
    const endpoint = await call('POST', '/v1/webhooks', { name: 'Policy events', url: 'http://127.0.0.1:9/policy-events', event_types: ['policy.activation_requested', 'approval_request.created', 'policy.activated'] }, o.secret);
    assert.equal(endpoint.status, 201);
    const policy = await createPolicy({ name: 'Needs approval', rules: [blockAbove('10'), allowRest] }, requester.secret);
    assert.equal(policy.created_by, requester.id);
    assert.equal(policy.created_by_name, 'Requester');

    const pending = await call('POST', `/v1/policies/${policy.id}/activate`, { comment: 'please' }, requester.secret);
    assert.equal(pending.status, 202, JSON.stringify(pending.body));
    assert.equal(pending.body.status, 'pending_authorization');
    assert.equal(pending.body.required_approvals, 2);
    const hours = (Date.parse(pending.body.expires_at) - Date.now()) / 3_600_000;
    assert.ok(hours > 71.9 && hours <= 72);
    const requestId = pending.body.approval_request_id;
    assert.equal(pending.body.workflow_id, `policy-activation-${requestId}`);
    assert.equal((await call('POST', `/v1/policies/${policy.id}/activate`, {}, requester.secret)).body.error.code, 'activation_pending');
    assert.equal((await call('PATCH', `/v1/policies/${policy.id}`, { name: 'Sneaky' }, requester.secret)).body.error.code, 'activation_pending');

    const path = (decision: string) => `/v1/approval-requests/${requestId}/${decision}`;
    assert.equal((await call('POST', path('approve'), {}, requester.secret)).body.error.code, 'requester_cannot_vote');
    assert.equal((await call('POST', path('approve'), {}, viewer.secret)).body.error.code, 'not_an_approver');
    const keyWithoutMember = await o.key(['policies:approve']);
    assert.equal((await call('POST', path('approve'), {}, keyWithoutMember.secret)).body.error.code, 'member_required');
    const noScope = await o.key(['policies:read']);
    const scoped = await call('POST', path('approve'), {}, noScope.secret);
    assert.deepEqual([scoped.status, scoped.body.error.details.required_scope], [403, 'policies:approve']);
    const outsider = await createTestOrganization('Outsider');
    assert.equal((await call('POST', path('approve'), {}, outsider.secret)).status, 404);

    const first = await call('POST', path('approve'), { comment: 'ok' }, ada.secret);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual([first.body.status, first.body.approvals], ['pending', 1]);
    assert.equal(first.body.workflow_id, pending.body.workflow_id, 'support goes from the request to its workflow history');
    const repeat = await call('POST', path('approve'), {}, ada.secret);
    assert.equal(repeat.body.approvals, 1);
    const last = await call('POST', path('approve'), {}, bob.secret);
    assert.deepEqual([last.body.status, last.body.approvals], ['approved', 2]);
    assert.equal((await call('GET', `/v1/policies/${policy.id}`, undefined, o.secret)).body.status, 'enforced');
    assert.equal((await call('POST', path('reject'), {}, viewer.secret)).status, 403);
    const closed = await call('POST', path('reject'), {}, ada.secret);
    assert.deepEqual([closed.status, closed.body.error.code], [409, 'approval_request_closed']);

    const audit = await call('GET', `/v1/policies/${policy.id}/audit-logs`, undefined, o.secret);
    assert.deepEqual(audit.body.data.map((e: { action: string }) => e.action), ['activated', 'approval_granted', 'approval_granted', 'activation_requested', 'created']);
    assert.equal(audit.body.data[0].actor_name, 'Bob');
    const events = await call('GET', `/v1/events?webhook_id=${endpoint.body.id}`, undefined, o.secret);
    const types = events.body.data.map((e: { type: string }) => e.type);
    // Newest first; the request's two events share a transaction (and often a millisecond): their order is not the contract.
    assert.equal(types[0], 'policy.activated');
    assert.deepEqual(types.slice(1).sort(), ['approval_request.created', 'policy.activation_requested'], 'every event reaches the endpoint');
    const created = await app.deps.orm.em.fork().findOneOrFail(Event, { organization: o.organizationId, type: 'approval_request.created' });
    assert.deepEqual(
      [created.data.id, created.data.object, created.data.policy_id, created.data.status, created.data.required_approvals, created.data.comment],
      [requestId, 'approval_request', policy.id, 'pending', 2, 'please'],
    );

    const second = await createPolicy({ name: 'Rejected one', rules: [blockAbove('1'), allowRest] }, requester.secret);
    const request2 = (await call('POST', `/v1/policies/${second.id}/activate`, {}, requester.secret)).body.approval_request_id;
    const rejected = await call('POST', `/v1/approval-requests/${request2}/reject`, {}, ada.secret);
    assert.equal(rejected.body.status, 'rejected');
    assert.equal((await call('GET', `/v1/policies/${second.id}`, undefined, o.secret)).body.status, 'draft');
  });

  it('refuses an activation that too few members could approve', async () => {
    const o = await createTestOrganization('Lonely');
    const policy = await createPolicy({ name: 'Alone', rules: [blockAbove('1'), allowRest] }, o.secret);
    const refused = await call('POST', `/v1/policies/${policy.id}/activate`, {}, o.secret);
    assert.deepEqual([refused.status, refused.body.error.code], [409, 'not_enough_approvers']);
  });

  it('keeps policies to their organization and checks scopes', async () => {
    const policy = await createPolicy({ name: 'Mine', rules: [allowRest] });
    const other = await createTestOrganization('Other');
    for (const [method, path] of [
      ['GET', `/v1/policies/${policy.id}`],
      ['PATCH', `/v1/policies/${policy.id}`],
      ['DELETE', `/v1/policies/${policy.id}`],
      ['POST', `/v1/policies/${policy.id}/validate`],
      ['POST', `/v1/policies/${policy.id}/activate`],
      ['GET', `/v1/policies/${policy.id}/audit-logs`],
      ['DELETE', `/v1/policies/${policy.id}/rules/${policy.rules[0].id}`],
    ] as const) {
      const response = await call(method, path, method === 'GET' || method === 'DELETE' ? undefined : {}, other.secret);
      assert.equal(response.status, 404, `${method} ${path}`);
    }
    assert.equal((await call('POST', '/v1/policies/evaluate', { policy_id: policy.id }, other.secret)).status, 404);
    assert.deepEqual((await call('GET', '/v1/policies', undefined, other.secret)).body.data, []);
    const reader = await org.key(['policies:read']);
    assert.equal((await call('GET', '/v1/policies', undefined, reader.secret)).status, 200);
    assert.equal((await call('POST', '/v1/policies/evaluate', {}, reader.secret)).status, 200);
    const write = await call('POST', '/v1/policies', { name: 'Nope' }, reader.secret);
    assert.deepEqual([write.status, write.body.error.details.required_scope], [403, 'policies:write']);
    const none = await org.key(['cards:read']);
    assert.equal((await call('GET', '/v1/policies/schema', undefined, none.secret)).status, 403);
  });

  it('keeps policies and approval requests to their environment: a live policy never decides a sandbox request, nor the reverse', async () => {
    const o = await createTestOrganization('Two environments');
    await setRequiredApprovals(o, 0);
    const live = await o.key(['*'], 'live');
    const livePolicy = await createPolicy({ name: 'Live limits', rules: [blockAbove('100'), allowRest] }, live.secret);
    assert.equal((await call('POST', `/v1/policies/${livePolicy.id}/activate`, {}, live.secret)).status, 200);
    const sandboxPolicy = await createPolicy({ name: 'Sandbox limits', rules: [blockAbove('1000'), allowRest] }, o.secret);
    assert.equal((await call('POST', `/v1/policies/${sandboxPolicy.id}/activate`, {}, o.secret)).status, 200);

    const inLive = await call('POST', '/v1/policies/evaluate', { amount: '500' }, live.secret);
    assert.deepEqual([inLive.body.result, inLive.body.policy_id], ['rejected', livePolicy.id]);
    const inSandbox = await call('POST', '/v1/policies/evaluate', { amount: '500' }, o.secret);
    assert.deepEqual([inSandbox.body.result, inSandbox.body.policy_id], ['matched_rule', sandboxPolicy.id]);

    const decide = async (environment: Environment) => {
      const actor: PolicyActor = { organizationId: o.organizationId, environment, id: o.apiKeyId, name: 'Root key', type: 'apikey' };
      const em = (await testOrm()).em.fork();
      return em.transactional((tx) => decideTransaction(tx, { amount: '500' }, actor)).then(
        ({ evaluation }) => evaluation.policy_id,
        (error: DomainError) => `${error.code}:${String(error.details?.policy_id)}`,
      );
    };
    assert.equal(await decide('sandbox'), sandboxPolicy.id, 'the live block above 100 does not decide a sandbox request');
    assert.equal(await decide('live'), `policy_blocked:${livePolicy.id}`);

    for (const [key, theirs] of [[live.secret, sandboxPolicy], [o.secret, livePolicy]] as const) {
      for (const [method, path] of [
        ['GET', `/v1/policies/${theirs.id}`],
        ['PATCH', `/v1/policies/${theirs.id}`],
        ['DELETE', `/v1/policies/${theirs.id}`],
        ['POST', `/v1/policies/${theirs.id}/validate`],
        ['POST', `/v1/policies/${theirs.id}/activate`],
        ['GET', `/v1/policies/${theirs.id}/audit-logs`],
        ['POST', `/v1/policies/${theirs.id}/rules`],
        ['DELETE', `/v1/policies/${theirs.id}/rules/${theirs.rules[0].id}`],
      ] as const) {
        const response = await call(method, path, method === 'GET' || method === 'DELETE' ? undefined : path.endsWith('/rules') ? allowRest : {}, key);
        assert.deepEqual([response.status, response.body.error?.code], [404, 'resource_missing'], `${method} ${path}`);
      }
      assert.equal((await call('POST', `/v1/policies/${theirs.id}/simulate`, { requests: [{}] }, key)).status, 404);
      assert.equal((await call('POST', '/v1/policies/evaluate', { policy_id: theirs.id }, key)).status, 404);
      assert.equal((await call('POST', '/v1/policies', { source_policy_id: theirs.id }, key)).status, 404);
      const listed = await call('GET', '/v1/policies?limit=100', undefined, key);
      assert.ok(!listed.body.data.some((p: { id: string }) => p.id === theirs.id), 'the other environment is not listed');
      assert.equal(listed.body.data.length, 1);
    }

    // An approval request lives in its policy's environment: the same approver's key of the other environment cannot see it.
    const p = await createTestOrganization('Two environments, approvals');
    await setRequiredApprovals(p, 1);
    const requester = await memberKey(p, 'Req', 'admin', ['policies:write'], 'live');
    const ada = await memberKey(p, 'Ada', 'approver', ['policies:approve'], 'live');
    const em = (await testOrm()).em.fork();
    const adaSandbox = createApiKey(em, { organization: em.getReference(Organization, p.organizationId), name: 'Ada sandbox', scopes: ['policies:approve'], environment: 'sandbox', member: em.getReference(Member, ada.id) });
    await em.flush();
    const policy = await createPolicy({ name: 'Live approval', rules: [blockAbove('1'), allowRest] }, requester.secret);
    const pending = await call('POST', `/v1/policies/${policy.id}/activate`, {}, requester.secret);
    assert.equal(pending.status, 202, pending.text);
    const path = `/v1/approval-requests/${pending.body.approval_request_id}/approve`;
    const wrongEnvironment = await call('POST', path, {}, adaSandbox.secret);
    assert.deepEqual([wrongEnvironment.status, wrongEnvironment.body.error.code], [404, 'resource_missing']);
    const approved = await call('POST', path, {}, ada.secret);
    assert.deepEqual([approved.status, approved.body.status], [200, 'approved']);
  });

  it('lets no requester satisfy their own quorum: minted keys and added members cannot vote; a genuine approver votes', async () => {
    const o = await createTestOrganization('Impersonation');
    await setRequiredApprovals(o, 1);
    const ada = await memberKey(o, 'Ada', 'approver', ['policies:approve', 'api_keys:admin']);
    const mint = (key: string, body: Record<string, unknown>) => app.request('POST', '/v1/api-keys', { key, body: { name: 'minted', scopes: ['policies:approve'], ...body } });

    const vote = (requestId: string, key: string) => call('POST', `/v1/approval-requests/${requestId}/approve`, {}, key);
    const refusedWith = async (requestId: string, key: string, code: string) => {
      const response = await vote(requestId, key);
      assert.deepEqual([response.status, response.body.error?.code], [403, code], response.text);
    };

    // 1. An unbound (service) key asks: it can add a member, but it mints no key at all, and it cannot vote.
    const admin = await o.key(['api_keys:admin', 'policies:write', 'policies:approve']);
    const policyA = await createPolicy({ name: 'Policy A', rules: [blockAbove('1'), allowRest] }, admin.secret);
    const requestA = (await call('POST', `/v1/policies/${policyA.id}/activate`, {}, admin.secret)).body.approval_request_id;
    assert.ok(requestA);
    const crony = await addedMember(o, { apiKeyId: admin.id, memberId: null }, 'Crony', 'approver');
    for (const userId of [crony, ada.id]) {
      const refused = await mint(admin.secret, { user_id: userId });
      assert.deepEqual([refused.status, refused.body.error.code], [403, 'member_required'], refused.text);
    }
    await refusedWith(requestA, admin.secret, 'member_required');

    // 2. An owner asks: the keys they mint for others wait for a confirmation, those for themselves are theirs, and the members they add cannot vote.
    const quinn = await ownerKey(o);
    const policyB = await createPolicy({ name: 'Policy B', rules: [blockAbove('1'), allowRest] }, quinn.secret);
    const requestB = (await call('POST', `/v1/policies/${policyB.id}/activate`, {}, quinn.secret)).body.approval_request_id;
    assert.ok(requestB);
    const yan = await addedMember(o, { apiKeyId: quinn.keyId, memberId: quinn.id }, 'Yan', 'approver');
    const yanKey = await mint(quinn.secret, { user_id: yan });
    assert.equal(yanKey.status, 201, 'an owner may mint a key for a member');
    await refusedWith(requestB, yanKey.body.secret, 'api_key_pending_confirmation');
    const adaByQuinn = await mint(quinn.secret, { user_id: ada.id });
    assert.equal(adaByQuinn.status, 201);
    assert.equal((await call('POST', `/v1/api-keys/${adaByQuinn.body.id}/confirm`, undefined, ada.secret)).status, 200);
    await refusedWith(requestB, adaByQuinn.body.secret, 'vote_not_independent');
    const quinnAgain = await mint(quinn.secret, {});
    await refusedWith(requestB, quinnAgain.body.secret, 'requester_cannot_vote');
    await refusedWith(requestB, quinn.secret, 'requester_cannot_vote');

    // 3. A member added after the request (even by someone else) cannot vote on it.
    const late = await memberKey(o, 'Late', 'approver', ['policies:approve']);
    await refusedWith(requestB, late.secret, 'vote_not_independent');

    // 4. The genuine approver's own key votes, on both.
    for (const [requestId, policyId] of [[requestA, policyA.id], [requestB, policyB.id]]) {
      const approved = await vote(requestId, ada.secret);
      assert.deepEqual([approved.status, approved.body.status], [200, 'approved'], approved.text);
      assert.equal((await call('GET', `/v1/policies/${policyId}`, undefined, o.secret)).body.status, 'enforced');
    }
  });

  describe('decideTransaction (what sending will call)', () => {
    it('blocks, holds for approval, delays or allows with an alert, auditing every decision with the actor', async () => {
      const o = await createTestOrganization('Decisions');
      await setRequiredApprovals(o, 0);
      const approver = await memberKey(o, 'Ann', 'approver');
      const policy = await createPolicy(
        {
          name: 'Sending',
          rules: [
            blockAbove('1000'),
            { name: 'Approve', action_type: 'require_approval', action_config: { approvers: [{ id: approver.id, type: 'user' }], required_approvals: 1, expiry_hours: 6 },
              conditions: [{ field: 'amount', operator: 'greater_than', value: '100' }] },
            { name: 'Cool down', action_type: 'delay', action_config: { delay_minutes: 15 }, conditions: [{ field: 'to_address', operator: 'contains', value: 'new' }] },
            { name: 'Watch', action_type: 'alert', conditions: [{ field: 'amount', operator: 'greater_than', value: '50' }] },
            allowRest,
          ],
        },
        o.secret,
      );
      assert.equal((await call('POST', `/v1/policies/${policy.id}/activate`, {}, o.secret)).status, 200);
      const actor: PolicyActor = { organizationId: o.organizationId, environment: 'sandbox', id: o.apiKeyId, name: 'Root key', type: 'apikey' };
      const decide = async (request: Record<string, string>) => {
        const em = (await testOrm()).em.fork();
        return (await em.transactional((tx) => decideTransaction(tx, request, actor))).evaluation;
      };
      const refusal = async (request: Record<string, string>) => {
        try {
          await decide(request);
        } catch (error) {
          assert.ok(error instanceof DomainError);
          // Its audit entry is written once the refused transaction has let its connection go, as the HTTP error handler waits for.
          await error.settling;
          return [httpStatus(error), error.code, error.details] as const;
        }
        return assert.fail('allowed');
      };
      assert.deepEqual(await refusal({ amount: '5000' }), [403, 'policy_blocked', { policy_id: policy.id, rule_id: policy.rules[0].id }]);
      assert.deepEqual(await refusal({ amount: '500' }), [400, 'policy_approval_required', { policy_id: policy.id, rule_id: policy.rules[1].id, required_approvals: 1, expiry_hours: 6 }]);
      assert.deepEqual(await refusal({ amount: '5', to_address: 'brand-new' }), [400, 'policy_delay_required', { policy_id: policy.id, rule_id: policy.rules[2].id, delay_minutes: 15 }]);
      assert.equal((await decide({ amount: '60' })).result, 'matched_rule');
      assert.equal((await decide({ amount: '1' })).allowed, true);

      const entries = await (await testOrm()).em.fork().find(PolicyAuditLog, { policyId: policy.id, action: { $in: ['decision', 'alert'] } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
      assert.deepEqual(entries.map((e) => e.action).filter((a) => a === 'decision').length, 5, 'refusals are audited although their transaction rolled back');
      const alert = entries.find((e) => e.action === 'alert')!;
      assert.equal(alert.metadata.event, 'policy.alert');
      assert.ok(entries.every((e) => e.actorId === o.apiKeyId && e.actorName === 'Root key'));
    });
  });
});
