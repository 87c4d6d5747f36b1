import { proxyActivities } from '@temporalio/workflow';
import type { createPolicyActivities } from '../activities/policies';
import type { governanceChangeFlow } from '../src/policies/flows/governance-change';
import { collectApprovals } from '../src/policies/flows/quorum';
import type { WorkflowOf } from '../src/temporal/flow';

const { recordApprovalVote, recordIndependentApprovalVote, applyApprovedChange, closeApprovalRequest } = proxyActivities<ReturnType<typeof createPolicyActivities>>({
  // Each is one short transaction; a stuck attempt is cut and retried.
  startToCloseTimeout: '1 minute',
  // Infrastructure failures only, retried until they pass (no attempt ceiling): each activity is idempotent.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One change request, under the organization's activation quorum (collectApprovals): approved
 * applies the change; rejected or expired (lapsed) leaves the control as it was.
 */
export const governanceChangeWorkflow: WorkflowOf<typeof governanceChangeFlow> = (input) =>
  collectApprovals(input, {
    recordVote: recordApprovalVote,
    recordIndependentVote: recordIndependentApprovalVote,
    carryOut: async (decision, decidedBy) => {
      if (decision === 'approved') await applyApprovedChange({ approvalRequestId: input.approvalRequestId, decidedBy });
      else await closeApprovalRequest({ approvalRequestId: input.approvalRequestId, status: decision, decidedBy });
    },
  });
