import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { Event } from '../../src/events/entities';
import { Member } from '../../src/organizations/entities';
import { createMember, createOrganization } from '../../src/organizations/service';
import { ApprovalRequest, GovernanceChange, Policy } from '../../src/policies/entities';
import { voteUpdate } from '../../src/policies/flows/activation';
import { governanceChangeWorkflowId, type GovernanceChangeInput } from '../../src/policies/flows/governance-change';
import { logChange } from '../../src/policies/governance-log';
import { workflowBundle } from '../../src/worker-setup';
import { governanceChangeWorkflow } from '../../workflows';
import { releaseTimeSkippingTemporal, testOrm, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { createTestWorker } from '../support/worker';

const HOUR = 3_600_000;

interface Scenario {
  input: GovernanceChangeInput;
  policyId: string;
  approvers: string[];
}

/** An enforced policy, a requester and two approvers, and a pending change request to archive the policy. */
async function scenario(env: TestWorkflowEnvironment, requiredApprovals: number): Promise<Scenario> {
  const em = (await testOrm()).em.fork();
  const organization = createOrganization(em, 'Change request test');
  const people: Member[] = [];
  for (const [name, role] of [['Requester', 'admin'], ['Ada', 'approver'], ['Bob', 'owner']] as const) {
    people.push(await createMember(em, organization, { name, email: `${name.toLowerCase()}-${randomUUID()}@example.com`, org_role: role }));
  }
  const policy = em.create(Policy, {
    organization,
    environment: 'sandbox',
    name: 'Limits',
    description: '',
    category: 'access',
    priority: 100,
    status: 'enforced',
    createdBy: people[0]!.id,
    createdByName: 'Requester',
    createdAt: new Date(),
    updatedAt: new Date(),
  });
  const requester = { organizationId: organization.id, type: 'user' as const, id: people[0]!.id, name: 'Requester' };
  const change = logChange(em, requester, { kind: 'policy_archived', environment: 'sandbox', subject: { policy_id: policy.id }, change: {} }, 'pending');
  const expiresAt = new Date((await env.currentTimeMs()) + 72 * HOUR);
  const request = em.create(ApprovalRequest, {
    organization,
    environment: 'sandbox',
    governanceChange: change,
    requestedBy: people[0]!.id,
    requestedByName: 'Requester',
    requiredApprovals,
    expiresAt,
    createdAt: new Date(),
  });
  change.approvalRequestId = request.id;
  await em.flush();
  return {
    input: {
      approvalRequestId: request.id,
      organizationId: organization.id,
      governanceChangeId: change.id,
      requesterId: people[0]!.id,
      requiredApprovals,
      expiresAt: expiresAt.toISOString(),
    },
    policyId: policy.id,
    approvers: people.slice(1).map((person) => person.id),
  };
}

async function stored(s: Scenario) {
  const em = (await testOrm()).em.fork();
  return {
    policy: (await em.findOneOrFail(Policy, { id: s.policyId })).status,
    request: (await em.findOneOrFail(ApprovalRequest, { id: s.input.approvalRequestId })).status,
    change: (await em.findOneOrFail(GovernanceChange, { id: s.input.governanceChangeId })).status,
    events: (await em.find(Event, { organization: s.input.organizationId }, { orderBy: { createdAt: 'asc', id: 'asc' } })).map((event) => event.type),
  };
}

describe('Governance change workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  const start = (s: Scenario, taskQueue: string) =>
    env.client.workflow.start(governanceChangeWorkflow, { taskQueue, workflowId: governanceChangeWorkflowId(s.input.approvalRequestId), args: [s.input] });

  it('applies the change once the required approvals arrive, not before', async () => {
    const s = await scenario(env, 2);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      assert.deepEqual(await handle.executeUpdate(voteUpdate, { args: [{ memberId: s.approvers[0]!, decision: 'approve' }] }), { status: 'pending', approvals: 1, requiredApprovals: 2 });
      assert.equal((await stored(s)).policy, 'enforced', 'one approval of two changes nothing');
      assert.equal((await handle.executeUpdate(voteUpdate, { args: [{ memberId: s.approvers[1]!, decision: 'approve' }] })).status, 'approved');
      assert.equal((await handle.result()).status, 'approved');
      await recordHistoryIfAsked(handle, 'governance-change');
    });
    assert.deepEqual(await stored(s), { policy: 'archived', request: 'approved', change: 'applied', events: ['approval_request.approved', 'policy.archived'] });
  });

  it('lapses at expires_at and ends on a rejection: the control stays as it was', async () => {
    const lapsed = await scenario(env, 1);
    let rejected!: Scenario;
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      assert.deepEqual(await (await start(lapsed, taskQueue)).result(), { status: 'expired', approvals: 0, requiredApprovals: 1 });
      // Made after the first lapsed: its expiry counts from the skipped-ahead clock.
      rejected = await scenario(env, 2);
      const handle = await start(rejected, taskQueue);
      assert.equal((await handle.executeUpdate(voteUpdate, { args: [{ memberId: rejected.approvers[0]!, decision: 'reject' }] })).status, 'rejected');
      await handle.result();
    });
    for (const [s, status] of [[lapsed, 'expired'], [rejected, 'rejected']] as const) {
      assert.deepEqual(await stored(s), { policy: 'enforced', request: status, change: status, events: [`approval_request.${status}`] });
    }
  });

  it('replays its recorded history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('governance-change'));
  });
});
