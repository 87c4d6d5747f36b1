import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { provenance, provenances, sharedOrigins, type Origin } from '../api-keys/provenance';
import { Member } from '../organizations/entities';
import { DomainError, errors } from '../shared/errors';
import type { WorkflowStarter } from '../temporal/starter';
import { canApproveActivations, findApprovalRequest, requesterProvenance } from './approvals';
import { ApprovalRequest, ApprovalVote } from './entities';
import { voteUpdate, VOTE_REFUSALS } from './flows/activation';
import type { VoteRecording } from './flows/quorum';
import { approvalWorkflowId } from './presenters';
import { writeAudit, type PolicyScope } from './service';

/**
 * Votes on approval requests: the API checks who may vote and sends the vote to the request's workflow, which has it
 * checked for independence and recorded (recordIndependentVote) one transaction at a time under the request's row lock.
 * No request holds a pooled connection while it waits for the workflow (issue 53).
 */

export type VoteInput = { approvalRequestId: string; memberId: string; apiKeyId?: string; decision: ApprovalVote['decision']; comment: string };

/**
 * One member's vote on a pending request, sent to its activation workflow; returns once the
 * workflow has counted it (and carried out the decision it makes). The workflow's refusals
 * become the API's errors.
 */
export async function castVote(
  em: EntityManager,
  starter: WorkflowStarter,
  voter: PolicyScope & { apiKeyId: string; memberId: string | null },
  approvalRequestId: string,
  vote: { decision: ApprovalVote['decision']; comment?: string },
): Promise<void> {
  const request = await findApprovalRequest(em, voter, approvalRequestId);
  if (!voter.memberId) throw errors.permission('member_required', 'Votes are cast by members: use a key that acts for a member (created with user_id).');
  const member = await em.findOneOrFail(Member, { id: voter.memberId });
  // A held send is voted on by the approvers its rule named (the M of its N-of-M); the rest by the organization's approving roles.
  if (request.approverMemberIds) {
    if (!request.approverMemberIds.includes(member.id)) {
      throw errors.permission('not_an_approver', `This member is not among the approvers of rule ${request.heldByRuleId}, which held the send.`);
    }
  } else if (!canApproveActivations(member)) {
    throw errors.permission('not_an_approver', `A member with org_role ${member.orgRole} cannot vote; owners, admins and approvers can.`);
  }
  if (member.id === request.requestedBy || voter.apiKeyId === request.requestedByKeyId) {
    throw errors.permission('requester_cannot_vote', 'The requester cannot vote on their own approval request.');
  }
  if (request.status !== 'pending') throw closed(request.status);
  const workflowId = approvalWorkflowId(request);
  // On a connection of its own: the start is marked fired whatever becomes of this vote.
  await starter.ensureStarted(em.fork(), workflowId);
  try {
    await starter.executeUpdate(workflowId, voteUpdate, { memberId: member.id, apiKeyId: voter.apiKeyId, decision: vote.decision, comment: vote.comment });
  } catch (error) {
    throw await voteRefusal(em, request, error);
  }
}

/** The workflow's refusal of a vote as the API's error: closed meanwhile (decided, or finished at expiry) answers the stored state. */
async function voteRefusal(em: EntityManager, request: ApprovalRequest, error: unknown): Promise<unknown> {
  const cause = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure)) return error;
  if (cause.type === VOTE_REFUSALS.requester) return errors.permission('requester_cannot_vote', cause.message);
  if (cause.type === VOTE_REFUSALS.notIndependent) {
    return errors.permission('vote_not_independent', cause.message, { approval_request_id: request.id, shared_origins: (cause.details?.[0] ?? []) as Origin[] });
  }
  if (cause.type === VOTE_REFUSALS.expired) return closed('expired');
  const fresh = await em.fork().findOne(ApprovalRequest, { id: request.id });
  if (fresh && fresh.status !== 'pending') return closed(fresh.status);
  if (cause.type === VOTE_REFUSALS.closed) return closed('decided');
  return error;
}

function closed(status: string): DomainError {
  return errors.conflict('approval_request_closed', `The approval request is ${status}; it takes no more votes.`, { status });
}

/**
 * The vote's key or member is not independent: a message for the voter and the origins it shares, or null when it counts.
 * One person, one vote (docs/policies.md, "Keys and people"): a vote counts only when its key's
 * provenance (the voter, who minted the key and who added the voter, up to the operator) shares
 * nothing with the requester's, traced both ways (a voter the requester's lineage made, a
 * requester the voter's lineage made), nor with that of any vote already counted from another
 * member; and the voter was a member when the request was opened.
 */
async function dependence(em: EntityManager, request: ApprovalRequest, vote: VoteInput, voter: Member): Promise<{ message: string; sharedOrigins: Origin[] } | null> {
  const voterOrigins = await provenance(em, vote.apiKeyId ? { keyId: vote.apiKeyId } : { memberId: vote.memberId });
  const withRequester = sharedOrigins(voterOrigins, await requesterProvenance(em, request));
  if (withRequester.length) {
    return {
      message:
        'This key or its member comes from the requester, or the requester from them (minted or added by the same key or member): it cannot vote on their request. Vote with a key of your own, one the operator CLI made or one minted from it.',
      sharedOrigins: withRequester,
    };
  }
  const counted = await em.find(ApprovalVote, { approvalRequest: request.id, decision: 'approve', member: { $ne: voter.id } });
  const countedOrigins = await provenances(em, counted.map((other) => (other.apiKeyId ? { keyId: other.apiKeyId } : { memberId: other.member.id })));
  for (const origins of countedOrigins) {
    const shared = sharedOrigins(voterOrigins, origins);
    if (shared.length) {
      return { message: 'This key or its member shares a minter or a member with a vote already counted: one person counts once. Vote with a key of your own, one the operator CLI made or one minted from it.', sharedOrigins: shared };
    }
  }
  if (voter.createdAt.getTime() > request.createdAt.getTime()) return { message: 'Members added after an approval was requested cannot vote on it.', sharedOrigins: [] };
  return null;
}

/**
 * The quorum's vote, checked and recorded in one transaction under the request's row lock, so that two votes of one person
 * cannot both pass the check at once: refused when not independent or no longer pending; a member's repeat answers the
 * decision recorded first.
 */
export async function recordIndependentVote(em: EntityManager, vote: VoteInput): Promise<VoteRecording> {
  const request = await em.findOne(ApprovalRequest, { id: vote.approvalRequestId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  // Gone with the address-book entry it concerned: nothing to record, and the quorum ends as it would have (its carrying out finds nothing).
  if (!request) return { recorded: vote.decision };
  if (request.status !== 'pending') return { closed: request.status };
  const earlier = await em.findOne(ApprovalVote, { approvalRequest: request, member: vote.memberId });
  if (earlier) return { recorded: earlier.decision };
  const voter = await em.findOneOrFail(Member, { id: vote.memberId });
  const refusal = await dependence(em, request, vote, voter);
  if (refusal) return { refused: refusal };
  addVote(em, request, voter, vote);
  return { recorded: vote.decision };
}

/** Records one member's vote once (a retry or a repeat is a no-op); returns whether it was new. Votes counted before recordIndependentVote replay through it. */
export async function recordVote(em: EntityManager, vote: VoteInput): Promise<boolean> {
  // Gone with the address-book entry it concerned: nothing left to vote on.
  const request = await em.findOne(ApprovalRequest, { id: vote.approvalRequestId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (!request || (await em.count(ApprovalVote, { approvalRequest: request, member: vote.memberId }))) return false;
  addVote(em, request, await em.findOneOrFail(Member, { id: vote.memberId }), vote);
  return true;
}

function addVote(em: EntityManager, request: ApprovalRequest, member: Member, vote: VoteInput): void {
  em.create(ApprovalVote, {
    approvalRequest: request,
    member,
    decision: vote.decision,
    comment: vote.comment,
    apiKeyId: vote.apiKeyId ?? null,
    createdAt: new Date(),
  });
  writeAudit(em, {
    actor: { organizationId: request.organization.id, environment: request.environment, id: member.id, name: member.name, type: 'user' },
    policyId: request.policy?.id ?? null,
    action: vote.decision === 'approve' ? 'approval_granted' : 'approval_rejected',
    metadata: { approval_request_id: request.id, comment: vote.comment, ...(request.addressBookEntry ? { address_book_entry_id: request.addressBookEntry.id } : {}) },
  });
}
