import { defineFlow } from '../../temporal/flow';
import type { ActivationState } from './activation';
import type { QuorumInput } from './quorum';

/**
 * The flow that approves using a new address-book entry before its cooling period ends: one
 * workflow per approval request, taking the same `vote` update as a policy activation
 * (./activation.ts). Shared by the policies domain, which records its start and sends the votes,
 * and workflows/address-book-entry-approval.ts. Workflow-safe: no Node APIs.
 */
export interface AddressBookEntryApprovalInput extends QuorumInput {
  organizationId: string;
  addressBookEntryId: string;
}

/** The workflow id from the approval request alone (what the API shows and sends votes to). */
export const entryApprovalWorkflowId = (approvalRequestId: string): string => `address-book-entry-approval-${approvalRequestId}`;

export const addressBookEntryApprovalFlow = defineFlow<AddressBookEntryApprovalInput, ActivationState>({
  workflowType: 'addressBookEntryApprovalWorkflow',
  workflowId: (input) => entryApprovalWorkflowId(input.approvalRequestId),
  resource: (input) => ({ type: 'approval_request', id: input.approvalRequestId }),
  // One run per approval request: asking again is a new request.
  idReusePolicy: 'REJECT_DUPLICATE',
  idConflictPolicy: 'FAIL',
});
