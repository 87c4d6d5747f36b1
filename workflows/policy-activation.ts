import { proxyActivities } from '@temporalio/workflow';
import type { createPolicyActivities } from '../activities/policies';
import type { policyActivationFlow } from '../src/policies/flows/activation';
import { collectApprovals } from '../src/policies/flows/quorum';
import type { WorkflowOf } from '../src/temporal/flow';

const { recordApprovalVote, recordIndependentApprovalVote, enforceApprovedPolicy, closeApprovalRequest } = proxyActivities<ReturnType<typeof createPolicyActivities>>({
  // Each is one short transaction; a stuck attempt is cut and retried.
  startToCloseTimeout: '1 minute',
  // Infrastructure failures only, retried until they pass (no attempt ceiling): each activity is idempotent.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One activation request of a draft policy, under the organization's quorum (collectApprovals):
 * approved enforces it; rejected or expired (lapsed) leaves it draft.
 */
export const policyActivationWorkflow: WorkflowOf<typeof policyActivationFlow> = (input) =>
  collectApprovals(input, {
    recordVote: recordApprovalVote,
    recordIndependentVote: recordIndependentApprovalVote,
    carryOut: async (decision, decidedBy) => {
      if (decision === 'approved') await enforceApprovedPolicy({ approvalRequestId: input.approvalRequestId, decidedBy });
      else await closeApprovalRequest({ approvalRequestId: input.approvalRequestId, status: decision, decidedBy });
    },
  });
