import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { AddressBookEntry } from '../address-book/entities';
import { findAddressBookEntry, isUsable } from '../address-book/service';
import { provenance, provenances, sharedOrigins, type Origin, type ProvenanceStart } from '../api-keys/provenance';
import { Member, Organization } from '../organizations/entities';
import { DomainError, errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { recordStart, type WorkflowStarter } from '../temporal/starter';
import { ApprovalRequest, ApprovalVote, type GovernanceChange, type Policy } from './entities';
import { emit } from '../events/service';
import { policyActivationFlow, voteUpdate, VOTE_REFUSALS } from './flows/activation';
import { addressBookEntryApprovalFlow } from './flows/address-book-entry-approval';
import { logChange, settleChange, type ChangeProposal, type GovernanceRequester } from './governance-log';
import { approvalWorkflowId, presentApprovalRequest } from './presenters';
import {
  draftRulesOf,
  enforcePolicy,
  findPolicy,
  pendingApprovalRequest,
  recordPolicyEvent,
  validateRules,
  writeAudit,
  type PolicyActor,
  type PolicyScope,
} from './service';

/**
 * Approvals under the organization's activation quorum: the request a draft's activation (or an
 * address-book entry's early use) opens, the members who may vote on it and their votes, which
 * go to the request's workflow.
 */

const APPROVING_ROLES = ['owner', 'admin', 'approver'] as const;
export const isApprovingRole = (orgRole: string): boolean => (APPROVING_ROLES as readonly string[]).includes(orgRole);
export const canApproveActivations = (member: Member): boolean => isApprovingRole(member.orgRole);

/**
 * The members who may vote on an activation: owners, admins and approvers whose provenance shares
 * nothing with the requester's (not the requester, nor a member the requester's lineage added,
 * nor one who added the requester's).
 */
export async function eligibleVoters(em: EntityManager, requester: PolicyActor): Promise<Member[]> {
  const members = await em.find(Member, { organization: requester.organizationId, orgRole: { $in: [...APPROVING_ROLES] } });
  const requesterOrigins = await requesterProvenance(em, { requestedBy: requester.id, requestedByKeyId: requester.apiKeyId ?? null });
  const origins = await provenances(em, members.map((member) => ({ memberId: member.id })));
  return members.filter((_, index) => sharedOrigins(origins[index]!, requesterOrigins).length === 0);
}

export type ActivationOutcome = { status: 'enforced'; policy: Policy } | { status: 'pending'; request: ApprovalRequest };

/**
 * Activates a valid draft: at once when the organization requires no approvals, else by opening an
 * approval request whose activation workflow starts once the caller's transaction commits.
 */
export async function requestActivation(
  em: EntityManager,
  actor: PolicyActor,
  policyId: string,
  options: { comment?: string; expiryHours: number },
): Promise<ActivationOutcome> {
  const policy = await findPolicy(em, actor, policyId);
  // Serializes concurrent activations of one policy, so only one request can be pending.
  await em.lock(policy, LockMode.PESSIMISTIC_WRITE);
  if (policy.status !== 'draft') throw errors.conflict('invalid_state_transition', `Only a draft can be activated; this policy is ${policy.status}.`);
  const pending = await pendingApprovalRequest(em, policy);
  if (pending) throw errors.conflict('activation_pending', 'An activation request for this policy is already pending.', { approval_request_id: pending.id });
  const validation = await validateRules(em, actor.organizationId, draftRulesOf(policy));
  if (!validation.valid) {
    throw new DomainError({
      kind: 'invalid',
      code: 'policy_invalid',
      message: 'The policy has errors; fix them before activating.',
      details: { diagnostics: validation.diagnostics, issue_count: validation.issue_count },
    });
  }
  const organization = await em.findOneOrFail(Organization, { id: actor.organizationId });
  const comment = options.comment ?? '';
  const proposal: ChangeProposal = {
    kind: 'policy_activated',
    environment: policy.environment,
    subject: { policy_id: policy.id, ...(policy.sourcePolicy?.status === 'enforced' ? { replaced_policy_id: policy.sourcePolicy.id } : {}) },
    change: { rule_count: policy.rules.length, only_blocks: onlyTightens(policy) },
  };
  // A policy that can only refuse more is a tightening: it needs nobody's approval.
  if (organization.policyActivationRequiredApprovals === 0 || onlyTightens(policy)) {
    await enforcePolicy(em, policy.id, actor, { comment, approvals_required: 0 });
    logChange(em, requesterOf(actor), proposal, 'applied');
    await em.flush();
    return { status: 'enforced', policy };
  }
  const request = await openApprovalRequest(em, actor, organization, { policy }, { comment, expiryHours: options.expiryHours });
  logChange(em, requesterOf(actor), proposal, 'pending').approvalRequestId = request.id;
  const { requiredApprovals, expiresAt } = request;
  await recordPolicyEvent(em, {
    organizationId: actor.organizationId,
    type: 'policy.activation_requested',
    actor,
    data: { policy_id: policy.id, approval_request_id: request.id, required_approvals: requiredApprovals, expires_at: expiresAt.toISOString(), comment },
  });
  // The request is new and pending (the policy lock makes it the only one), so its start is recorded once.
  recordStart(
    em,
    policyActivationFlow,
    {
      approvalRequestId: request.id,
      organizationId: actor.organizationId,
      policyId: policy.id,
      requesterId: actor.id,
      requiredApprovals,
      expiresAt: expiresAt.toISOString(),
    },
    actor.organizationId,
  );
  await em.flush();
  return { status: 'pending', request };
}

/**
 * A draft whose activation can only refuse more, so it is a tightening and needs no quorum: it has
 * rules, every one of them blocks, and it replaces no enforced policy. Evaluated first-match-wins
 * across the enforced policies, its rules can only turn an outcome into a block, and once any policy
 * is enforced a request no rule matches is denied anyway; nothing it adds lets a request through.
 */
export const onlyTightens = (policy: Policy): boolean =>
  policy.rules.length > 0 && policy.rules.getItems().every((rule) => rule.actionType === 'block') && policy.sourcePolicy?.status !== 'enforced';

/** The requester of a governance change a member or key asks for. */
export const requesterOf = (actor: PolicyActor): GovernanceRequester => ({
  organizationId: actor.organizationId,
  type: actor.type === 'user' ? 'user' : 'apikey',
  id: actor.id,
  name: actor.name,
  apiKeyId: actor.apiKeyId ?? null,
});

/**
 * A pending request on `subject` under the organization's quorum (at least one approval), once
 * enough members other than the requester can vote: 409 `not_enough_approvers` otherwise. Every
 * request is announced as `approval_request.created` (data: the request as the API presents it).
 */
export async function openApprovalRequest(
  em: EntityManager,
  actor: PolicyActor,
  organization: Organization,
  subject: { policy: Policy } | { addressBookEntry: AddressBookEntry } | { governanceChange: GovernanceChange },
  options: { comment: string; expiryHours: number },
): Promise<ApprovalRequest> {
  const requiredApprovals = organization.policyActivationRequiredApprovals;
  const voters = await eligibleVoters(em, actor);
  if (voters.length < requiredApprovals) throw notEnoughApprovers(organization.id, requiredApprovals, voters.length);
  const request = em.create(ApprovalRequest, {
    organization,
    environment: actor.environment,
    ...subject,
    requestedBy: actor.id,
    requestedByKeyId: actor.apiKeyId ?? null,
    requestedByName: actor.name,
    comment: options.comment,
    requiredApprovals,
    expiresAt: new Date(Date.now() + options.expiryHours * 3_600_000),
    createdAt: new Date(),
  });
  await emit(em, { organizationId: organization.id, environment: actor.environment, type: 'approval_request.created', data: presentApprovalRequest(request) });
  return request;
}

/**
 * The 409 of a request that could never be approved, with the ways out: members the requester
 * added may not vote on the requester's requests, so approvers come from the operator's CLI
 * (member and key), or the organization's count is lowered (docs/policies.md, "First approvers").
 */
function notEnoughApprovers(organizationId: string, required: number, eligible: number): DomainError {
  const addApprover = [
    `npm run cli -- member:create --org ${organizationId} --name NAME --email EMAIL --org-role approver`,
    `npm run cli -- key:create --org ${organizationId} --name NAME --scopes policies:read,policies:approve --user-id MEMBER_ID`,
  ];
  const configure = `npm run cli -- org:configure --org ${organizationId} --policy-activation-approvals N`;
  return errors.conflict(
    'not_enough_approvers',
    `Approval needs ${required} approval(s) but only ${eligible} other owner/admin/approver member(s) can vote; members the requester added cannot. ` +
      `Add an approver with the operator CLI (${addApprover.join(', then ')}) before requesting, or set the count with ${configure} (0 enforces at once). See docs/policies.md.`,
    { required_approvals: required, eligible_approvers: eligible, add_approver: addApprover, configure },
  );
}

export type EntryApprovalOutcome = { status: 'usable'; entry: AddressBookEntry } | { status: 'pending'; request: ApprovalRequest };

/**
 * Asks to use an address-book entry before its cooling period ends, under the same quorum as a
 * policy activation: an entry already usable is answered as it is; with no approvals required it
 * becomes usable at once; otherwise an approval request opens, whose workflow makes the entry
 * usable once approved. One pending request per entry (409 `approval_pending`).
 */
export async function requestEntryApproval(
  em: EntityManager,
  actor: PolicyActor,
  entryId: string,
  options: { comment?: string; expiryHours: number },
): Promise<EntryApprovalOutcome> {
  // Locked: concurrent requests for one entry open one approval request.
  const entry = await findAddressBookEntry(em, actor, entryId, 'id', true);
  if (isUsable(entry)) return { status: 'usable', entry };
  const pending = await em.findOne(ApprovalRequest, { addressBookEntry: entry, status: 'pending' });
  if (pending) throw errors.conflict('approval_pending', 'An approval request for this entry is already pending.', { approval_request_id: pending.id });
  const organization = await em.findOneOrFail(Organization, { id: actor.organizationId });
  const comment = options.comment ?? '';
  if (organization.policyActivationRequiredApprovals === 0) {
    makeEntryUsable(em, entry, actor, { comment, approvals_required: 0 });
    await em.flush();
    return { status: 'usable', entry };
  }
  const request = await openApprovalRequest(em, actor, organization, { addressBookEntry: entry }, { comment, expiryHours: options.expiryHours });
  writeAudit(em, {
    actor,
    policyId: null,
    action: 'address_book_entry_approval_requested',
    metadata: { address_book_entry_id: entry.id, approval_request_id: request.id, required_approvals: request.requiredApprovals, expires_at: request.expiresAt.toISOString(), comment },
  });
  // The request is new and the only pending one (the entry lock), so its start is recorded once.
  recordStart(
    em,
    addressBookEntryApprovalFlow,
    {
      approvalRequestId: request.id,
      organizationId: actor.organizationId,
      addressBookEntryId: entry.id,
      requesterId: actor.id,
      requiredApprovals: request.requiredApprovals,
      expiresAt: request.expiresAt.toISOString(),
    },
    actor.organizationId,
  );
  await em.flush();
  return { status: 'pending', request };
}

/** The entry counts from now on (an earlier usable_at stays), with the audit entry saying who allowed it. */
export function makeEntryUsable(em: EntityManager, entry: AddressBookEntry, actor: PolicyActor, metadata: Record<string, unknown>): void {
  const now = new Date();
  if (entry.usableAt.getTime() > now.getTime()) entry.usableAt = now;
  writeAudit(em, { actor, policyId: null, action: 'address_book_entry_approved', metadata: { address_book_entry_id: entry.id, usable_at: entry.usableAt.toISOString(), ...metadata } });
}

export async function findApprovalRequest(em: EntityManager, scope: PolicyScope, id: string): Promise<ApprovalRequest> {
  const request = await em.findOne(
    ApprovalRequest,
    { id, organization: scope.organizationId, environment: scope.environment },
    { populate: ['votes', 'votes.member', 'policy', 'addressBookEntry', 'governanceChange'] },
  );
  if (!request) throw errors.notFound('approval_request', id);
  return request;
}

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
  // Before the votes' transaction, on a connection of its own: the start is marked fired whatever becomes of this vote.
  await starter.ensureStarted(em.fork(), workflowId);
  let notCounted: unknown;
  try {
    // Votes on one request are checked and counted one at a time, so two keys of one person cannot both pass the check at once.
    await em.fork().transactional(async (votes) => {
      await votes.execute('select pg_advisory_xact_lock(hashtext(?))', [`approval-votes:${request.id}`]);
      await assertIndependentVoter(votes, request, voter.apiKeyId, member);
      await starter.executeUpdate(workflowId, voteUpdate, { memberId: member.id, apiKeyId: voter.apiKeyId, decision: vote.decision, comment: vote.comment }).catch((error: unknown) => {
        notCounted = error;
        throw error;
      });
    });
  } catch (error) {
    throw error === notCounted ? await voteRefusal(em, request, error) : error;
  }
}

/**
 * The workflow's refusal of a vote as the API's error, read once the votes' transaction has ended (no request holds
 * its connection while it waits for another): closed meanwhile (decided, or finished at expiry) answers the stored state.
 */
async function voteRefusal(em: EntityManager, request: ApprovalRequest, error: unknown): Promise<unknown> {
  const cause = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
  if (cause instanceof ApplicationFailure && cause.type === VOTE_REFUSALS.requester) return errors.permission('requester_cannot_vote', cause.message);
  if (cause instanceof ApplicationFailure && cause.type === VOTE_REFUSALS.expired) return closed('expired');
  const fresh = await em.fork().findOne(ApprovalRequest, { id: request.id });
  if (fresh && fresh.status !== 'pending') return closed(fresh.status);
  if (cause instanceof ApplicationFailure && cause.type === VOTE_REFUSALS.closed) return closed('decided');
  return error;
}

/** Everything the requester comes from: the requesting key's provenance, and the requesting member's (a request made before keys were recorded has only that). */
async function requesterProvenance(em: EntityManager, request: Pick<ApprovalRequest, 'requestedBy' | 'requestedByKeyId'>): Promise<Set<Origin>> {
  const starts: ProvenanceStart[] = [
    ...(request.requestedByKeyId ? [{ keyId: request.requestedByKeyId }] : []),
    ...(isUuid(request.requestedBy) ? [{ memberId: request.requestedBy }] : []),
  ];
  return new Set((await provenances(em, starts)).flatMap((origins) => [...origins]));
}

/**
 * One person, one vote (docs/policies.md, "Keys and people"): a vote counts only when its key's
 * provenance (the voter, who minted the key and who added the voter, up to the operator) shares
 * nothing with the requester's, traced both ways (a voter the requester's lineage made, a
 * requester the voter's lineage made), nor with that of any vote already counted from another
 * member; and the voter was a member when the request was opened. A repeat of a counted member is
 * the workflow's to answer (counted once).
 */
async function assertIndependentVoter(em: EntityManager, request: ApprovalRequest, votingKeyId: string, voter: Member): Promise<void> {
  const notIndependent = (message: string, shared: Origin[]) =>
    errors.permission('vote_not_independent', message, { approval_request_id: request.id, shared_origins: shared });
  const voterOrigins = await provenance(em, { keyId: votingKeyId });
  const withRequester = sharedOrigins(voterOrigins, await requesterProvenance(em, request));
  if (withRequester.length) {
    throw notIndependent(
      'This key or its member comes from the requester, or the requester from them (minted or added by the same key or member): it cannot vote on their request. Vote with a key of your own, one the operator CLI made or one minted from it.',
      withRequester,
    );
  }
  const counted = await em.find(ApprovalVote, { approvalRequest: request.id, decision: 'approve', member: { $ne: voter.id } });
  const countedOrigins = await provenances(em, counted.map((vote) => (vote.apiKeyId ? { keyId: vote.apiKeyId } : { memberId: vote.member.id })));
  for (const origins of countedOrigins) {
    const shared = sharedOrigins(voterOrigins, origins);
    if (shared.length) {
      throw notIndependent('This key or its member shares a minter or a member with a vote already counted: one person counts once. Vote with a key of your own, one the operator CLI made or one minted from it.', shared);
    }
  }
  if (voter.createdAt.getTime() > request.createdAt.getTime()) {
    throw notIndependent('Members added after an approval was requested cannot vote on it.', []);
  }
}

function closed(status: string): DomainError {
  return errors.conflict('approval_request_closed', `The approval request is ${status}; it takes no more votes.`, { status });
}

/** Records one member's vote once (a retry or a repeat is a no-op); returns whether it was new. */
export async function recordVote(
  em: EntityManager,
  input: { approvalRequestId: string; memberId: string; apiKeyId?: string; decision: ApprovalVote['decision']; comment: string },
): Promise<boolean> {
  // Gone with the address-book entry it concerned: nothing left to vote on.
  const request = await em.findOne(ApprovalRequest, { id: input.approvalRequestId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (!request || (await em.count(ApprovalVote, { approvalRequest: request, member: input.memberId }))) return false;
  em.create(ApprovalVote, {
    approvalRequest: request,
    member: em.getReference(Member, input.memberId),
    decision: input.decision,
    comment: input.comment,
    apiKeyId: input.apiKeyId ?? null,
    createdAt: new Date(),
  });
  const member = await em.findOneOrFail(Member, { id: input.memberId });
  writeAudit(em, {
    actor: { organizationId: request.organization.id, environment: request.environment, id: member.id, name: member.name, type: 'user' },
    policyId: request.policy?.id ?? null,
    action: input.decision === 'approve' ? 'approval_granted' : 'approval_rejected',
    metadata: { approval_request_id: request.id, comment: input.comment, ...(request.addressBookEntry ? { address_book_entry_id: request.addressBookEntry.id } : {}) },
  });
  return true;
}

/**
 * Closes a pending request with the quorum's decision, in the transaction that carries it out: the
 * change it governed (if any) takes the outcome in the governance log, and the decision is announced
 * as `approval_request.approved`, `.rejected` or `.expired` (data: the request as the API presents it).
 */
export async function decideApprovalRequest(em: EntityManager, request: ApprovalRequest, decision: 'approved' | 'rejected' | 'expired'): Promise<void> {
  request.status = decision;
  request.decidedAt ??= new Date();
  await settleChange(em, request.id, decision);
  await announceDecision(em, request);
}

/** `approval_request.<status>` for a request just decided (or an approval that lapsed unused). */
export async function announceDecision(em: EntityManager, request: ApprovalRequest): Promise<void> {
  await em.populate(request, ['votes', 'votes.member', 'policy', 'addressBookEntry', 'governanceChange']);
  const type = `approval_request.${request.status as 'approved' | 'rejected' | 'expired'}` as const;
  await emit(em, { organizationId: request.organization.id, environment: request.environment, type, data: presentApprovalRequest(request) });
}
