import { proxyActivities, sleep } from '@temporalio/workflow';
import type { createPolicyActivities } from '../activities/policies';
import type { transactionApprovalFlow } from '../src/policies/flows/transaction-approval';
import { collectApprovals } from '../src/policies/flows/quorum';
import type { WorkflowOf } from '../src/temporal/flow';

const { recordApprovalVote, recordIndependentApprovalVote, closeHeldSendRequest, expireUnusedSendApproval } = proxyActivities<ReturnType<typeof createPolicyActivities>>({
  // Each is one short transaction; a stuck attempt is cut and retried.
  startToCloseTimeout: '1 minute',
  // Infrastructure failures only, retried until they pass (no attempt ceiling): each activity is idempotent.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One held send, under its rule's quorum (collectApprovals): approved lets the identical send pass
 * the gate once until expires_at; at expires_at an approval no send used ends `expired`. Rejected
 * or expired before approval: the send stays held.
 */
export const transactionApprovalWorkflow: WorkflowOf<typeof transactionApprovalFlow> = async (input) => {
  const state = await collectApprovals(input, {
    recordVote: recordApprovalVote,
    recordIndependentVote: recordIndependentApprovalVote,
    carryOut: (decision, decidedBy) => closeHeldSendRequest({ approvalRequestId: input.approvalRequestId, status: decision, decidedBy }),
  });
  if (state.status !== 'approved') return state;
  // A durable timer: the approval's window ends at expires_at whether or not this worker is up then.
  await sleep(Math.max(1, Date.parse(input.expiresAt) - Date.now()));
  const lapsed = await expireUnusedSendApproval({ approvalRequestId: input.approvalRequestId });
  return lapsed ? { ...state, status: 'expired' } : state;
};
