import { defineFlow } from '../../temporal/flow';
import type { ActivationState } from './activation';
import type { QuorumInput } from './quorum';

/**
 * The flow that approves a send a `require_approval` rule held: one workflow per approval request,
 * taking the same `vote` update as a policy activation (./activation.ts) under the holding rule's
 * count, then, once approved, waiting until expires_at to close the approval if no send used it.
 * Shared by the policies domain, which records its start and sends the votes, and
 * workflows/transaction-approval.ts. Workflow-safe: no Node APIs.
 */
export interface TransactionApprovalInput extends QuorumInput {
  organizationId: string;
}

/** The workflow id from the approval request alone (what the API shows and sends votes to). */
export const transactionApprovalWorkflowId = (approvalRequestId: string): string => `transaction-approval-${approvalRequestId}`;

export const transactionApprovalFlow = defineFlow<TransactionApprovalInput, ActivationState>({
  workflowType: 'transactionApprovalWorkflow',
  workflowId: (input) => transactionApprovalWorkflowId(input.approvalRequestId),
  resource: (input) => ({ type: 'approval_request', id: input.approvalRequestId }),
  // One run per approval request: a send held again after a decision is a new request.
  idReusePolicy: 'REJECT_DUPLICATE',
  idConflictPolicy: 'FAIL',
});
