import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { Member } from '../../src/organizations/entities';
import { createMember, createOrganization } from '../../src/organizations/service';
import { ApprovalRequest, PolicyAuditLog } from '../../src/policies/entities';
import { voteUpdate } from '../../src/policies/flows/activation';
import { transactionApprovalWorkflowId, type TransactionApprovalInput } from '../../src/policies/flows/transaction-approval';
import { workflowBundle } from '../../src/worker-setup';
import { transactionApprovalWorkflow } from '../../workflows';
import { decisionsOf } from '../support/approval-decisions';
import { testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { createTestWorker } from '../support/worker';

const HOUR = 3_600_000;

interface Scenario {
  input: TransactionApprovalInput;
  approvers: string[];
}

/** A send held by a rule naming two approvers, its approval request open for 2 hours. */
async function scenario(env: TestWorkflowEnvironment, requiredApprovals: number): Promise<Scenario> {
  const em = (await testOrm()).em.fork();
  const organization = createOrganization(em, 'Held send test');
  await em.flush();
  const people: Member[] = [];
  for (const [name, role] of [['Requester', 'admin'], ['Ada', 'approver'], ['Bob', 'approver']] as const) {
    people.push(await createMember(em, organization, { name, email: `${name.toLowerCase()}-${randomUUID()}@example.com`, org_role: role }));
  }
  const expiresAt = new Date((await env.currentTimeMs()) + 2 * HOUR);
  const request = em.create(ApprovalRequest, {
    organization,
    environment: 'sandbox',
    transactionDigest: randomUUID(),
    transactionRequest: { amount: '1' },
    heldByPolicyId: 'pol_test',
    heldByRuleId: 'rule_test',
    approverMemberIds: people.slice(1).map((person) => person.id),
    requestedBy: people[0]!.id,
    requestedByName: 'Requester',
    requiredApprovals,
    expiresAt,
    createdAt: new Date(),
  });
  await em.flush();
  return {
    input: { approvalRequestId: request.id, organizationId: organization.id, requesterId: people[0]!.id, requiredApprovals, expiresAt: expiresAt.toISOString() },
    approvers: people.slice(1).map((person) => person.id),
  };
}

async function stored(s: Scenario) {
  const em = (await testOrm()).em.fork();
  return {
    status: (await em.findOneOrFail(ApprovalRequest, { id: s.input.approvalRequestId })).status,
    audit: (await em.find(PolicyAuditLog, { organization: s.input.organizationId }, { orderBy: { createdAt: 'asc', id: 'asc' } })).map((entry) => entry.action),
    decisions: await decisionsOf(s.input.organizationId, s.input.approvalRequestId),
  };
}

describe('Held send approval workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  const start = (s: Scenario, taskQueue: string) =>
    env.client.workflow.start(transactionApprovalWorkflow, { taskQueue, workflowId: transactionApprovalWorkflowId(s.input.approvalRequestId), args: [s.input] });

  it('approves at the quorum; an approval no send used ends expired at expires_at', async () => {
    const s = await scenario(env, 2);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      assert.equal((await handle.executeUpdate(voteUpdate, { args: [{ memberId: s.approvers[0]!, decision: 'approve' }] })).status, 'pending');
      assert.equal((await handle.executeUpdate(voteUpdate, { args: [{ memberId: s.approvers[1]!, decision: 'approve' }] })).status, 'approved');
      assert.equal((await stored(s)).status, 'approved', 'approved once the deciding vote is answered');
      assert.deepEqual(await handle.result(), { status: 'expired', approvals: 2, requiredApprovals: 2 });
      await recordHistoryIfAsked(handle, 'transaction-approval');
    });
    assert.deepEqual(await stored(s), {
      status: 'expired',
      audit: ['approval_granted', 'approval_granted', 'transaction_approval_approved', 'transaction_approval_expired'],
      decisions: [
        ['approval_request.approved', 'sandbox', 'approved'],
        ['approval_request.expired', 'sandbox', 'expired'],
      ],
    });
  });

  it('leaves an approval a send used approved; a request no one decides lapses; a rejection ends it', async () => {
    const used = await scenario(env, 1);
    const lapsed = await scenario(env, 1);
    let rejected!: Scenario;
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(used, taskQueue);
      assert.equal((await handle.executeUpdate(voteUpdate, { args: [{ memberId: used.approvers[0]!, decision: 'approve' }] })).status, 'approved');
      // What the gate does when the identical send passes (policies/held-sends.ts).
      await (await testOrm()).em.fork().nativeUpdate(ApprovalRequest, { id: used.input.approvalRequestId }, { consumedAt: new Date(), consumedByTransactionId: randomUUID() });
      assert.equal((await handle.result()).status, 'approved');
      assert.equal((await (await start(lapsed, taskQueue)).result()).status, 'expired');
      // Made after the others lapsed: its expiry counts from the skipped-ahead clock.
      rejected = await scenario(env, 1);
      const refusal = await start(rejected, taskQueue);
      assert.equal((await refusal.executeUpdate(voteUpdate, { args: [{ memberId: rejected.approvers[1]!, decision: 'reject' }] })).status, 'rejected');
      await refusal.result();
    });
    assert.deepEqual(await stored(used), { status: 'approved', audit: ['approval_granted', 'transaction_approval_approved'], decisions: [['approval_request.approved', 'sandbox', 'approved']] });
    assert.deepEqual(await stored(lapsed), { status: 'expired', audit: ['transaction_approval_expired'], decisions: [['approval_request.expired', 'sandbox', 'expired']] });
    assert.deepEqual(await stored(rejected), { status: 'rejected', audit: ['approval_rejected', 'transaction_approval_rejected'], decisions: [['approval_request.rejected', 'sandbox', 'rejected']] });
  });

  it('replays its recorded history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('transaction-approval'));
  });
});
