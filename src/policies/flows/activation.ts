import { defineQuery, defineUpdate } from '@temporalio/workflow';
import { defineFlow } from '../../temporal/flow';

/**
 * The policy activation flow: one workflow per approval request, collecting votes until the
 * policy is enforced, rejected or the request lapses. Shared by the policies domain, which records
 * its start and sends the votes, and workflows/policy-activation.ts. Workflow-safe: no Node APIs.
 */
export interface PolicyActivationInput {
  approvalRequestId: string;
  organizationId: string;
  policyId: string;
  /** Member id (or API key id) of the requester, who cannot vote. */
  requesterId: string;
  requiredApprovals: number;
  expiresAt: string;
}

export type ActivationDecision = 'approved' | 'rejected' | 'expired';

export interface ActivationState {
  status: 'pending' | ActivationDecision;
  approvals: number;
  requiredApprovals: number;
}

/** The workflow id from the approval request alone (what the API shows and sends votes to). */
export const activationWorkflowId = (approvalRequestId: string): string => `policy-activation-${approvalRequestId}`;

export const policyActivationFlow = defineFlow<PolicyActivationInput, ActivationState>({
  workflowType: 'policyActivationWorkflow',
  workflowId: (input) => activationWorkflowId(input.approvalRequestId),
  resource: (input) => ({ type: 'approval_request', id: input.approvalRequestId }),
  // One run per approval request: a new activation is a new request.
  idReusePolicy: 'REJECT_DUPLICATE',
  idConflictPolicy: 'FAIL',
});

export interface VoteInput {
  memberId: string;
  /** The key the vote was cast with (absent in votes sent before it was recorded). */
  apiKeyId?: string;
  decision: 'approve' | 'reject';
  comment?: string;
}

/** Failure types a vote can be refused with; the policies domain maps each to an error code. */
export const VOTE_REFUSALS = {
  requester: 'RequesterCannotVote',
  closed: 'ApprovalRequestClosed',
  expired: 'ApprovalRequestExpired',
  /** The voter's key or member comes from the requester, or shares an origin with a vote counted (details: the origins). */
  notIndependent: 'VoteNotIndependent',
} as const;

/** A vote; validated (requester, closed, expired) before it enters history. Answers once decided and carried out. */
export const voteUpdate = defineUpdate<ActivationState, [VoteInput]>('vote');
export const activationStateQuery = defineQuery<ActivationState>('state');
