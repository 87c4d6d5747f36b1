import { defineFlow } from '../../temporal/flow';
import type { ActivationState } from './activation';
import type { QuorumInput } from './quorum';

/**
 * The flow of a change request: a loosening change to a control (archiving an enforced policy,
 * raising a gas station's limits, lowering the approval count, shortening the cooling period,
 * adding an approver) waits for the organization's quorum, one workflow per approval request,
 * taking the same `vote` update as a policy activation (./activation.ts), and is applied once
 * approved or left as it was when rejected or lapsed. Shared by the policies domain, which records
 * its start and sends the votes, and workflows/governance-change.ts. Workflow-safe: no Node APIs.
 */
export interface GovernanceChangeInput extends QuorumInput {
  organizationId: string;
  governanceChangeId: string;
}

/** The workflow id from the approval request alone (what the API shows and sends votes to). */
export const governanceChangeWorkflowId = (approvalRequestId: string): string => `governance-change-${approvalRequestId}`;

export const governanceChangeFlow = defineFlow<GovernanceChangeInput, ActivationState>({
  workflowType: 'governanceChangeWorkflow',
  workflowId: (input) => governanceChangeWorkflowId(input.approvalRequestId),
  resource: (input) => ({ type: 'approval_request', id: input.approvalRequestId }),
  // One run per approval request: asking again is a new request.
  idReusePolicy: 'REJECT_DUPLICATE',
  idConflictPolicy: 'FAIL',
});
