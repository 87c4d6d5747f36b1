import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { Organization } from '../organizations/entities';
import { iso, isoOrNull } from '../shared/time';
import { ApprovalRequest, GovernanceChange, type GovernanceActorType, type GovernanceChangeKind, type GovernanceChangeStatus } from './entities';

/**
 * The governance log: one row per change to the controls, written in the transaction that applies
 * the change or opens its change request, and settled once when that request is decided. Who asked
 * is on the row; who approved are the votes of its approval request.
 */

/** Who asks for a governance change. */
export interface GovernanceRequester {
  organizationId: string;
  type: GovernanceActorType;
  id: string;
  name: string;
  apiKeyId?: string | null;
}

/** The operator, through the CLI: applies directly, and is logged as such. */
export const operatorRequester = (organizationId: string): GovernanceRequester => ({ organizationId, type: 'operator', id: 'operator', name: 'operator' });

/** A change as proposed: what it does, to what, in which environment (null: organization-wide). */
export interface ChangeProposal {
  kind: GovernanceChangeKind;
  environment: Environment | null;
  subject: Record<string, string>;
  change: Record<string, unknown>;
}

/** Writes the change's row: `applied` now, or `pending` (the caller sets the approval request that decides it). */
export function logChange(em: EntityManager, requester: GovernanceRequester, proposal: ChangeProposal, status: 'applied' | 'pending'): GovernanceChange {
  const now = new Date();
  return em.create(GovernanceChange, {
    organization: em.getReference(Organization, requester.organizationId),
    environment: proposal.environment,
    kind: proposal.kind,
    subject: proposal.subject,
    change: proposal.change,
    requestedByType: requester.type,
    requestedById: requester.id,
    requestedByName: requester.name,
    requestedByKeyId: requester.apiKeyId ?? null,
    approvalRequestId: null,
    status,
    appliedAt: status === 'applied' ? now : null,
    createdAt: now,
  });
}

const SETTLED: Record<'approved' | 'rejected' | 'expired', GovernanceChangeStatus> = { approved: 'applied', rejected: 'rejected', expired: 'expired' };

/**
 * The change a decided request governed (if it governed one) takes the request's outcome, in the
 * transaction that carries the decision out; a change already settled stays as it is.
 */
export async function settleChange(em: EntityManager, approvalRequestId: string, decision: 'approved' | 'rejected' | 'expired'): Promise<GovernanceChange | null> {
  const change = await em.findOne(GovernanceChange, { approvalRequestId });
  if (change?.status !== 'pending') return change;
  change.status = SETTLED[decision];
  if (decision === 'approved') change.appliedAt = new Date();
  return change;
}

/** The log entry as the API presents it; `request`: its approval request with votes and members, if it had one. */
export function presentGovernanceChange(change: GovernanceChange, request: ApprovalRequest | undefined) {
  const approvals = request
    ? request.votes
        .getItems()
        .filter((vote) => vote.decision === 'approve')
        .map((vote) => ({ member_id: vote.member.id, name: vote.member.name, at: iso(vote.createdAt) }))
    : [];
  return {
    id: change.id,
    object: 'governance_change' as const,
    kind: change.kind,
    environment: change.environment ?? null,
    subject: change.subject,
    change: change.change,
    requested_by: { type: change.requestedByType, id: change.requestedById, name: change.requestedByName },
    approval_request_id: change.approvalRequestId ?? null,
    required_approvals: request?.requiredApprovals ?? 0,
    approvals,
    status: change.status,
    requested_at: iso(change.createdAt),
    applied_at: isoOrNull(change.appliedAt),
    decided_at: isoOrNull(request?.decidedAt ?? change.appliedAt),
  };
}

/** The approval requests of a page of log entries, by id, with their votes' members. */
export async function requestsOf(em: EntityManager, changes: readonly GovernanceChange[]): Promise<Map<string, ApprovalRequest>> {
  const ids = changes.map((change) => change.approvalRequestId).filter((id): id is string => !!id);
  const requests = ids.length ? await em.find(ApprovalRequest, { id: { $in: ids } }, { populate: ['votes', 'votes.member'] }) : [];
  return new Map(requests.map((request) => [request.id, request]));
}
