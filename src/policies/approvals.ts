import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AddressBookEntry } from '../address-book/entities';
import { findAddressBookEntry, isUsable } from '../address-book/service';
import { provenances, sharedOrigins, type Origin, type ProvenanceStart } from '../api-keys/provenance';
import { Member, Organization } from '../organizations/entities';
import { DomainError, errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { recordStart } from '../temporal/starter';
import { ApprovalRequest, type GovernanceChange, type Policy } from './entities';
import { emit } from '../events/service';
import { policyActivationFlow } from './flows/activation';
import { addressBookEntryApprovalFlow } from './flows/address-book-entry-approval';
import { logChange, settleChange, type ChangeProposal, type GovernanceRequester } from './governance-log';
import { presentApprovalRequest } from './presenters';
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

/** Everything the requester comes from: the requesting key's provenance, and the requesting member's (a request made before keys were recorded has only that). */
export async function requesterProvenance(em: EntityManager, request: Pick<ApprovalRequest, 'requestedBy' | 'requestedByKeyId'>): Promise<Set<Origin>> {
  const starts: ProvenanceStart[] = [
    ...(request.requestedByKeyId ? [{ keyId: request.requestedByKeyId }] : []),
    ...(isUuid(request.requestedBy) ? [{ memberId: request.requestedBy }] : []),
  ];
  return new Set((await provenances(em, starts)).flatMap((origins) => [...origins]));
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
