import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Client, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { Member, Organization } from '../../src/organizations/entities';
import { createMember, createOrganization } from '../../src/organizations/service';
import { activationWorkflowId, voteUpdate, VOTE_REFUSALS, type PolicyActivationInput } from '../../src/policies/flows/activation';
import { ApprovalRequest, ApprovalVote, Policy, PolicyAuditLog } from '../../src/policies/entities';
import { requestActivation } from '../../src/policies/approvals';
import { createPolicy, enforcePolicy, type PolicyActor } from '../../src/policies/service';
import { WorkflowStart } from '../../src/temporal/entities';
import { workflowBundle } from '../../src/worker-setup';
import { policyActivationWorkflow, workflowStartSweepWorkflow } from '../../workflows';
import { decisionsOf } from '../support/approval-decisions';
import { testConfig, testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const HOUR = 3_600_000;

interface Scenario {
  input: PolicyActivationInput;
  policyId: string;
  sourceId: string;
  requester: string;
  approvers: string[];
}

/** An organization with a requester and three approvers, an enforced policy and a draft copy of it awaiting approval. */
async function scenario(env: TestWorkflowEnvironment, requiredApprovals: number): Promise<Scenario> {
  const em = (await testOrm()).em.fork();
  const organization = createOrganization(em, 'Activation test');
  await em.flush();
  const people: Member[] = [];
  for (const [name, role] of [['Requester', 'admin'], ['Ada', 'approver'], ['Bob', 'approver'], ['Cy', 'owner']] as const) {
    people.push(await createMember(em, organization, { name, email: `${name.toLowerCase()}-${randomUUID()}@example.com`, org_role: role }));
  }
  await em.flush();
  const actor: PolicyActor = { organizationId: organization.id, environment: 'sandbox', id: people[0]!.id, name: 'Requester', type: 'user' };
  const rules = [{ name: 'Block big', action_type: 'block' as const, conditions: [{ field: 'amount', operator: 'greater_than', value: '10' }] }];
  const source = await createPolicy(em, testConfig(), actor, { name: 'Limits v1', rules });
  await em.flush();
  await em.transactional((tx) => enforcePolicy(tx, source.id, actor, {}));
  const draft = await createPolicy(em, testConfig(), actor, { source_policy_id: source.id });
  const expiresAt = new Date((await env.currentTimeMs()) + 72 * HOUR);
  const request = em.create(ApprovalRequest, {
    organization: em.getReference(Organization, organization.id),
    environment: 'sandbox',
    policy: draft,
    requestedBy: actor.id,
    requestedByName: actor.name,
    requiredApprovals,
    expiresAt,
    createdAt: new Date(),
  });
  await em.flush();
  return {
    input: { approvalRequestId: request.id, organizationId: organization.id, policyId: draft.id, requesterId: actor.id, requiredApprovals, expiresAt: expiresAt.toISOString() },
    policyId: draft.id,
    sourceId: source.id,
    requester: people[0]!.id,
    approvers: people.slice(1).map((person) => person.id),
  };
}

async function stored(s: Scenario) {
  const em = (await testOrm()).em.fork();
  return {
    policy: (await em.findOneOrFail(Policy, { id: s.policyId })).status,
    source: (await em.findOneOrFail(Policy, { id: s.sourceId })).status,
    request: (await em.findOneOrFail(ApprovalRequest, { id: s.input.approvalRequestId })).status,
    votes: await em.count(ApprovalVote, { approvalRequest: s.input.approvalRequestId }),
    audit: (await em.find(PolicyAuditLog, { policyId: s.policyId }, { orderBy: { createdAt: 'asc' } })).map((entry) => entry.action),
    decisions: await decisionsOf(s.input.organizationId, s.input.approvalRequestId),
  };
}

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof WorkflowUpdateFailedError, String(error));
    assert.ok(error.cause instanceof ApplicationFailure);
    return error.cause.type ?? '';
  }
  assert.fail('the vote was accepted');
}

describe('Policy activation workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  async function start(s: Scenario, taskQueue: string): Promise<WorkflowHandle<typeof policyActivationWorkflow>> {
    return env.client.workflow.start(policyActivationWorkflow, { taskQueue, workflowId: activationWorkflowId(s.input.approvalRequestId), args: [s.input] });
  }

  const vote = (handle: WorkflowHandle, memberId: string, decision: 'approve' | 'reject' = 'approve') =>
    handle.executeUpdate(voteUpdate, { args: [{ memberId, decision }] });

  it('enforces the policy once the required approvals arrive before expiry, archiving the version it replaces', async () => {
    const s = await scenario(env, 2);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      assert.deepEqual(await vote(handle, s.approvers[0]!), { status: 'pending', approvals: 1, requiredApprovals: 2 });
      assert.equal((await stored(s)).policy, 'draft');
      assert.deepEqual(await vote(handle, s.approvers[1]!), { status: 'approved', approvals: 2, requiredApprovals: 2 });
      assert.equal((await handle.result()).status, 'approved');
      await recordHistoryIfAsked(handle, 'policy-activation');
    });
    const after = await stored(s);
    assert.equal(after.policy, 'enforced');
    assert.equal(after.source, 'archived');
    assert.equal(after.request, 'approved');
    assert.equal(after.votes, 2);
    assert.deepEqual(after.audit, ['created', 'approval_granted', 'approval_granted', 'activated']);
    assert.deepEqual(after.decisions, [['approval_request.approved', 'sandbox', 'approved']]);
  });

  it('lapses at expires_at: the policy stays draft and the request is expired', async () => {
    const s = await scenario(env, 2);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      await vote(handle, s.approvers[0]!);
      const result = await handle.result();
      assert.deepEqual(result, { status: 'expired', approvals: 1, requiredApprovals: 2 });
      await assert.rejects(vote(handle, s.approvers[1]!), 'a closed workflow takes no votes');
    });
    const after = await stored(s);
    assert.equal(after.policy, 'draft');
    assert.equal(after.source, 'enforced');
    assert.equal(after.request, 'expired');
    assert.ok(after.audit.includes('activation_expired'));
    assert.deepEqual(after.decisions, [['approval_request.expired', 'sandbox', 'expired']]);
  });

  it('refuses an approval after expiry', async () => {
    const s = await scenario(env, 1);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      await handle.result();
      await assert.rejects(vote(handle, s.approvers[0]!));
    });
    assert.equal((await stored(s)).policy, 'draft');
    assert.equal((await stored(s)).votes, 0);
  });

  it('ends on a rejection: the policy stays draft and later votes are refused', async () => {
    const s = await scenario(env, 2);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      await vote(handle, s.approvers[0]!);
      assert.equal((await vote(handle, s.approvers[1]!, 'reject')).status, 'rejected');
      assert.equal((await handle.result()).status, 'rejected');
      await assert.rejects(vote(handle, s.approvers[2]!));
    });
    const after = await stored(s);
    assert.equal(after.policy, 'draft');
    assert.equal(after.request, 'rejected');
    assert.ok(after.audit.includes('activation_rejected'));
    assert.deepEqual(after.decisions, [['approval_request.rejected', 'sandbox', 'rejected']]);
  });

  it("refuses the requester's own vote before it enters history", async () => {
    const s = await scenario(env, 1);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      assert.equal(await refusal(vote(handle, s.requester)), VOTE_REFUSALS.requester);
      assert.equal((await handle.describe()).status.name, 'RUNNING');
      await vote(handle, s.approvers[2]!);
      await handle.result();
    });
    const after = await stored(s);
    assert.equal(after.votes, 1);
    assert.equal(after.policy, 'enforced');
  });

  it('counts a duplicate vote once', async () => {
    const s = await scenario(env, 2);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      assert.equal((await vote(handle, s.approvers[0]!)).approvals, 1);
      assert.deepEqual(await vote(handle, s.approvers[0]!), { status: 'pending', approvals: 1, requiredApprovals: 2 });
      assert.equal((await stored(s)).votes, 1);
      assert.equal((await vote(handle, s.approvers[1]!)).status, 'approved');
      await handle.result();
    });
    assert.equal((await stored(s)).policy, 'enforced');
  });

  it('is started exactly once by the start sweep when the process died between commit and start', async () => {
    const s = await scenario(env, 1);
    const em = (await testOrm()).em.fork();
    const actor: PolicyActor = { organizationId: s.input.organizationId, environment: 'sandbox', id: s.requester, name: 'Requester', type: 'user' };
    const draft = await createPolicy(em, testConfig(), actor, { source_policy_id: s.sourceId });
    await em.flush();
    // The activation commits with its recorded start; nothing fires it (the process died right after commit).
    const outcome = await em.transactional((tx) => requestActivation(tx, actor, draft.id, { expiryHours: 72 }));
    assert.equal(outcome.status, 'pending');
    const approvalRequestId = outcome.status === 'pending' ? outcome.request.id : '';
    const workflowId = activationWorkflowId(approvalRequestId);
    const start = await em.fork().findOneOrFail(WorkflowStart, { workflowId });
    assert.equal(start.startedAt, null);
    // The time-skipping server's clock runs ahead of the wall clock after earlier tests: expire 72 h from its now.
    const expiresAt = new Date((await env.currentTimeMs()) + 72 * HOUR);
    await em.nativeUpdate(ApprovalRequest, { id: approvalRequestId }, { expiresAt });
    await em.nativeUpdate(WorkflowStart, { id: start.id }, { input: { ...(start.input as PolicyActivationInput), expiresAt: expiresAt.toISOString() } });

    // The time-skipping server has no custom search attributes.
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES);
    await worker.runUntil(async () => {
      // A plain client: waiting for the sweeps must not skip time past the activation's expiry.
      const client = new Client({ connection: env.connection, namespace: env.namespace });
      const sweep = (run: number) =>
        client.workflow.execute(workflowStartSweepWorkflow, {
          taskQueue,
          workflowId: `sweep-${approvalRequestId}-${run}`,
          args: [{ graceSeconds: 0, organizationId: s.input.organizationId }],
        });
      assert.deepEqual(await sweep(1), { started: 1 });
      assert.deepEqual(await sweep(2), { started: 0 }, 'a fired start is not fired again');
      const handle = env.client.workflow.getHandle<typeof policyActivationWorkflow>(workflowId);
      assert.equal((await vote(handle, s.approvers[0]!)).status, 'approved');
      assert.equal((await handle.result()).status, 'approved');
    });
    const em2 = (await testOrm()).em.fork();
    assert.equal((await em2.findOneOrFail(Policy, { id: draft.id })).status, 'enforced');
    assert.equal((await em2.findOneOrFail(ApprovalRequest, { id: approvalRequestId })).status, 'approved');
    assert.ok((await em2.findOneOrFail(WorkflowStart, { workflowId })).startedAt);
  });

  it('replays its recorded history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('policy-activation'));
  });
});
