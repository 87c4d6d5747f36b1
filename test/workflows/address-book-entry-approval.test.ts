import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { AddressBookEntry } from '../../src/address-book/entities';
import { Member, Organization } from '../../src/organizations/entities';
import { createMember, createOrganization } from '../../src/organizations/service';
import { ApprovalRequest, PolicyAuditLog } from '../../src/policies/entities';
import { voteUpdate } from '../../src/policies/flows/activation';
import { entryApprovalWorkflowId, type AddressBookEntryApprovalInput } from '../../src/policies/flows/address-book-entry-approval';
import { workflowBundle } from '../../src/worker-setup';
import { addressBookEntryApprovalWorkflow } from '../../workflows';
import { decisionsOf } from '../support/approval-decisions';
import { testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { createTestWorker } from '../support/worker';

const HOUR = 3_600_000;

interface Scenario {
  input: AddressBookEntryApprovalInput;
  entryId: string;
  usableAt: Date;
  approvers: string[];
}

/** A live entry in its 24 h cooling period, a requester and two approvers, and an approval request for the entry's early use. */
async function scenario(env: TestWorkflowEnvironment, requiredApprovals: number): Promise<Scenario> {
  const em = (await testOrm()).em.fork();
  const organization = createOrganization(em, 'Entry approval test');
  await em.flush();
  const people: Member[] = [];
  for (const [name, role] of [['Requester', 'admin'], ['Ada', 'approver'], ['Bob', 'owner']] as const) {
    people.push(await createMember(em, organization, { name, email: `${name.toLowerCase()}-${randomUUID()}@example.com`, org_role: role }));
  }
  const createdAt = new Date();
  const usableAt = new Date(createdAt.getTime() + 24 * HOUR);
  const entry = em.create(AddressBookEntry, {
    organization,
    environment: 'live',
    chain: 'ethereum',
    network: 'mainnet',
    address: '0x8617E340B3D01FA5F11F306F4090FD50E238070D',
    label: 'Cold storage',
    createdAt,
    usableAt,
  });
  const expiresAt = new Date((await env.currentTimeMs()) + 72 * HOUR);
  const request = em.create(ApprovalRequest, {
    organization: em.getReference(Organization, organization.id),
    environment: 'live',
    addressBookEntry: entry,
    requestedBy: people[0]!.id,
    requestedByName: 'Requester',
    requiredApprovals,
    expiresAt,
    createdAt: new Date(),
  });
  await em.flush();
  return {
    input: {
      approvalRequestId: request.id,
      organizationId: organization.id,
      addressBookEntryId: entry.id,
      requesterId: people[0]!.id,
      requiredApprovals,
      expiresAt: expiresAt.toISOString(),
    },
    entryId: entry.id,
    usableAt,
    approvers: people.slice(1).map((person) => person.id),
  };
}

async function stored(s: Scenario) {
  const em = (await testOrm()).em.fork();
  return {
    usableAt: (await em.findOne(AddressBookEntry, { id: s.entryId }))?.usableAt ?? null,
    request: (await em.findOne(ApprovalRequest, { id: s.input.approvalRequestId }))?.status ?? null,
    audit: (await em.find(PolicyAuditLog, { organization: s.input.organizationId }, { orderBy: { createdAt: 'asc', id: 'asc' } })).map((entry) => entry.action),
    decisions: await decisionsOf(s.input.organizationId, s.input.approvalRequestId),
  };
}

describe('Address-book entry approval workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  const start = (s: Scenario, taskQueue: string) =>
    env.client.workflow.start(addressBookEntryApprovalWorkflow, { taskQueue, workflowId: entryApprovalWorkflowId(s.input.approvalRequestId), args: [s.input] });

  it('makes the entry usable once the required approvals arrive, not before', async () => {
    const s = await scenario(env, 2);
    const { worker, taskQueue } = await createTestWorker(env);
    const before = new Date();
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      assert.deepEqual(await handle.executeUpdate(voteUpdate, { args: [{ memberId: s.approvers[0]!, decision: 'approve' }] }), { status: 'pending', approvals: 1, requiredApprovals: 2 });
      assert.deepEqual((await stored(s)).usableAt, s.usableAt, 'one approval of two changes nothing');
      assert.equal((await handle.executeUpdate(voteUpdate, { args: [{ memberId: s.approvers[1]!, decision: 'approve' }] })).status, 'approved');
      assert.equal((await handle.result()).status, 'approved');
      await recordHistoryIfAsked(handle, 'address-book-entry-approval');
    });
    const after = await stored(s);
    assert.ok(after.usableAt! >= before && after.usableAt! <= new Date(), `usable from the deciding vote: ${after.usableAt?.toISOString()}`);
    assert.equal(after.request, 'approved');
    assert.deepEqual(after.audit, ['approval_granted', 'approval_granted', 'address_book_entry_approved']);
    assert.deepEqual(after.decisions, [['approval_request.approved', 'live', 'approved']]);
  });

  it('lapses at expires_at, and ends on a rejection: the entry keeps its cooling period', async () => {
    const lapsed = await scenario(env, 1);
    let rejected!: Scenario;
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      assert.deepEqual(await (await start(lapsed, taskQueue)).result(), { status: 'expired', approvals: 0, requiredApprovals: 1 });
      // Made after the first lapsed: its expiry counts from the skipped-ahead clock.
      rejected = await scenario(env, 2);
      const handle = await start(rejected, taskQueue);
      await handle.executeUpdate(voteUpdate, { args: [{ memberId: rejected.approvers[0]!, decision: 'approve' }] });
      assert.equal((await handle.executeUpdate(voteUpdate, { args: [{ memberId: rejected.approvers[1]!, decision: 'reject' }] })).status, 'rejected');
      await handle.result();
    });
    for (const [s, status] of [[lapsed, 'expired'], [rejected, 'rejected']] as const) {
      const after = await stored(s);
      assert.deepEqual(after.usableAt, s.usableAt);
      assert.equal(after.request, status);
      assert.equal(after.audit.at(-1), `address_book_entry_approval_${status}`);
      assert.deepEqual(after.decisions, [[`approval_request.${status}`, 'live', status]]);
    }
  });

  it('ends without touching anything when the entry is deleted while its request is pending', async () => {
    const s = await scenario(env, 1);
    const { worker, taskQueue } = await createTestWorker(env);
    await worker.runUntil(async () => {
      const handle = await start(s, taskQueue);
      await (await testOrm()).em.fork().nativeDelete(AddressBookEntry, { id: s.entryId });
      assert.equal((await handle.executeUpdate(voteUpdate, { args: [{ memberId: s.approvers[0]!, decision: 'approve' }] })).status, 'approved');
      await handle.result();
    });
    assert.deepEqual(await stored(s), { usableAt: null, request: null, audit: [], decisions: [] }, 'nothing decided, nothing announced');
  });

  it('replays its recorded history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('address-book-entry-approval'));
  });
});
