import { defineQuery, defineUpdate } from '@temporalio/workflow';

/**
 * The messages of the policy activation workflow, shared by the workflow and the API that sends
 * them. Imported by workflows: this file must stay free of Node APIs.
 */

export const activationWorkflowId = (approvalRequestId: string): string => `policy-activation-${approvalRequestId}`;

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

export interface VoteInput {
  memberId: string;
  decision: 'approve' | 'reject';
  comment?: string;
}

export interface ActivationState {
  status: 'pending' | ActivationDecision;
  approvals: number;
  requiredApprovals: number;
}

/** Failure types a vote can be refused with; the API maps each to an error code. */
export const VOTE_REFUSALS = {
  requester: 'RequesterCannotVote',
  closed: 'ApprovalRequestClosed',
  expired: 'ApprovalRequestExpired',
} as const;

/** A vote; validated (requester, closed, expired) before it enters history. Answers once decided and carried out. */
export const voteUpdate = defineUpdate<ActivationState, [VoteInput]>('vote');
export const activationStateQuery = defineQuery<ActivationState>('state');
