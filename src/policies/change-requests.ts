import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Organization } from '../organizations/entities';
import { errors } from '../shared/errors';
import { iso } from '../shared/time';
import { recordStart } from '../temporal/starter';
import { openApprovalRequest, requesterOf } from './approvals';
import { GovernanceChange, type ApprovalRequest, type GovernanceChangeKind, type Policy } from './entities';
import { governanceChangeFlow } from './flows/governance-change';
import { logChange, type ChangeProposal } from './governance-log';
import { presentPendingApproval } from './presenters';
import { archivePolicy, findPolicy, recordPolicyEvent, type PolicyActor } from './service';

/**
 * Change requests: a loosening change to a control (docs/policies.md, "Governance") waits for the
 * organization's activation quorum, as an approval request whose workflow
 * (`governance-change-<approval request id>`) applies it once approved; a tightening one applies at
 * once. Either way the governance log has it, and the applied change is announced.
 */

export interface ChangeOptions {
  comment?: string | undefined;
  expiryHours: number;
}

export type ChangeOutcome = { status: 'applied'; change: GovernanceChange } | { status: 'pending'; change: GovernanceChange; request: ApprovalRequest };

/**
 * A loosening change: applied at once (by `apply`, in the caller's transaction) when the organization
 * requires no approvals, else opened as a change request (409 `not_enough_approvers` when too few
 * members could vote), announced as `policy.change_requested`.
 */
export async function proposeLoosening(
  em: EntityManager,
  actor: PolicyActor,
  proposal: ChangeProposal,
  options: ChangeOptions,
  apply: () => Promise<void>,
): Promise<ChangeOutcome> {
  const organization = await em.findOneOrFail(Organization, { id: actor.organizationId });
  if (organization.policyActivationRequiredApprovals === 0) return { status: 'applied', change: await applyNow(em, actor, proposal, apply) };
  const change = logChange(em, requesterOf(actor), proposal, 'pending');
  const comment = options.comment ?? '';
  const request = await openApprovalRequest(em, actor, organization, { governanceChange: change }, { comment, expiryHours: options.expiryHours });
  change.approvalRequestId = request.id;
  await recordPolicyEvent(em, {
    organizationId: actor.organizationId,
    type: 'policy.change_requested',
    actor,
    data: { ...changeData(change), required_approvals: request.requiredApprovals, expires_at: iso(request.expiresAt), comment },
  });
  // The change is new and pending (its subject's lock makes it the only one), so its start is recorded once.
  recordStart(
    em,
    governanceChangeFlow,
    {
      approvalRequestId: request.id,
      organizationId: actor.organizationId,
      governanceChangeId: change.id,
      requesterId: actor.id,
      requiredApprovals: request.requiredApprovals,
      expiresAt: iso(request.expiresAt),
    },
    actor.organizationId,
  );
  await em.flush();
  return { status: 'pending', change, request };
}

/** A tightening change (or a loosening the organization lets through without approvals): applied now, logged and announced. */
export async function applyNow(em: EntityManager, actor: PolicyActor, proposal: ChangeProposal, apply: () => Promise<void>): Promise<GovernanceChange> {
  await apply();
  const change = logChange(em, requesterOf(actor), proposal, 'applied');
  await announceApplied(em, actor, change);
  return change;
}

/** `policy.archived` for an enforced policy archived, `policy.changed` for any other control changed; the decider is `actor`. */
export async function announceApplied(em: EntityManager, actor: PolicyActor, change: GovernanceChange): Promise<void> {
  await recordPolicyEvent(em, { organizationId: change.organization.id, type: change.kind === 'policy_archived' ? 'policy.archived' : 'policy.changed', actor, data: changeData(change) });
}

const changeData = (change: GovernanceChange) => ({
  policy_id: change.subject.policy_id ?? null,
  governance_change_id: change.id,
  kind: change.kind,
  subject: change.subject,
  change: change.change,
  approval_request_id: change.approvalRequestId ?? null,
});

/**
 * 409 `change_pending` while a change of one of `kinds` on the same subject waits for approvals:
 * one change request per control at a time. The caller holds the subject's row lock.
 */
export async function assertNoPendingChange(em: EntityManager, organizationId: string, kinds: readonly GovernanceChangeKind[], subject: Record<string, string> = {}): Promise<void> {
  const pending = await em.findOne(GovernanceChange, { organization: organizationId, kind: { $in: [...kinds] }, status: 'pending', ...(Object.keys(subject).length ? { subject } : {}) });
  if (pending) {
    throw errors.conflict('change_pending', `A ${pending.kind} change of this control already waits for approvals; vote on it or let it lapse first.`, {
      governance_change_id: pending.id,
      approval_request_id: pending.approvalRequestId,
    });
  }
}

/** The 202 answer of a change request; the caller adds its subject. */
export function presentChangeRequest(outcome: Extract<ChangeOutcome, { status: 'pending' }>, what: string) {
  return {
    ...presentPendingApproval(outcome.request, what, 'GET /v1/governance/log shows it applied'),
    governance_change_id: outcome.change.id,
    kind: outcome.change.kind,
    change: outcome.change.change,
  };
}

export type ArchiveOutcome = { status: 'archived'; policy: Policy } | Extract<ChangeOutcome, { status: 'pending' }>;

/**
 * `DELETE /v1/policies/:id`: a draft (or an archived policy) is archived at once; an enforced one
 * stops being enforced only through a change request, as archiving it loosens the controls.
 */
export async function requestArchive(em: EntityManager, actor: PolicyActor, policyId: string, options: ChangeOptions): Promise<ArchiveOutcome> {
  const policy = await findPolicy(em, actor, policyId);
  if (policy.status !== 'enforced') return { status: 'archived', policy: await archivePolicy(em, actor, policyId) };
  // Serializes concurrent archives of one policy: one change request at a time.
  await em.lock(policy, LockMode.PESSIMISTIC_WRITE);
  const subject = { policy_id: policy.id };
  await assertNoPendingChange(em, actor.organizationId, ['policy_archived'], subject);
  const proposal: ChangeProposal = { kind: 'policy_archived', environment: policy.environment, subject, change: { status: { from: 'enforced', to: 'archived' } } };
  const outcome = await proposeLoosening(em, actor, proposal, options, async () => void (await archivePolicy(em, actor, policy.id)));
  return outcome.status === 'pending' ? outcome : { status: 'archived', policy };
}
