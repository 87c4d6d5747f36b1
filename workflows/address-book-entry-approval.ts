import { proxyActivities } from '@temporalio/workflow';
import type { createPolicyActivities } from '../activities/policies';
import type { addressBookEntryApprovalFlow } from '../src/policies/flows/address-book-entry-approval';
import { collectApprovals } from '../src/policies/flows/quorum';
import type { WorkflowOf } from '../src/temporal/flow';

const { recordApprovalVote, recordIndependentApprovalVote, makeApprovedEntryUsable, closeApprovalRequest } = proxyActivities<ReturnType<typeof createPolicyActivities>>({
  // Each is one short transaction; a stuck attempt is cut and retried.
  startToCloseTimeout: '1 minute',
  // Infrastructure failures only, retried until they pass (no attempt ceiling): each activity is idempotent.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One request to use a new address-book entry before its cooling period ends, under the
 * organization's activation quorum (collectApprovals): approved makes the entry usable now;
 * rejected or expired leaves its usable_at as it was.
 */
export const addressBookEntryApprovalWorkflow: WorkflowOf<typeof addressBookEntryApprovalFlow> = (input) =>
  collectApprovals(input, {
    recordVote: recordApprovalVote,
    recordIndependentVote: recordIndependentApprovalVote,
    carryOut: async (decision, decidedBy) => {
      if (decision === 'approved') await makeApprovedEntryUsable({ approvalRequestId: input.approvalRequestId, decidedBy });
      else await closeApprovalRequest({ approvalRequestId: input.approvalRequestId, status: decision, decidedBy });
    },
  });
