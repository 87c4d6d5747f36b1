import { allHandlersFinished, ApplicationFailure, condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { createPolicyActivities } from '../activities/policies';
import {
  activationStateQuery,
  voteUpdate,
  VOTE_REFUSALS,
  type ActivationDecision,
  type ActivationState,
  type policyActivationFlow,
} from '../src/policies/flows/activation';
import type { WorkflowOf } from '../src/temporal/flow';

const { recordApprovalVote, enforceApprovedPolicy, closeApprovalRequest } = proxyActivities<ReturnType<typeof createPolicyActivities>>({
  // Each is one short transaction; a stuck attempt is cut and retried.
  startToCloseTimeout: '1 minute',
  // Infrastructure failures only, retried until they pass (no attempt ceiling): each activity is idempotent.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One activation request of a draft policy: votes arrive as the `vote` update until the required
 * approvals are reached (enforced), someone rejects (stays draft) or expires_at passes (lapsed,
 * stays draft). The expiry is a durable timer, not a date check alone.
 */
export const policyActivationWorkflow: WorkflowOf<typeof policyActivationFlow> = async (input) => {
  const expiresAtMs = Date.parse(input.expiresAt);
  const votes = new Map<string, 'approve' | 'reject'>();
  let decision: ActivationDecision | undefined;
  let decidedBy: string | undefined;
  let carriedOut = false;
  const approvals = () => [...votes.values()].filter((vote) => vote === 'approve').length;
  const state = (): ActivationState => ({ status: decision ?? 'pending', approvals: approvals(), requiredApprovals: input.requiredApprovals });

  setHandler(activationStateQuery, state);
  setHandler(
    voteUpdate,
    async (vote) => {
      // One vote per member: a repeat is answered with the current state and counted once.
      if (votes.has(vote.memberId)) return state();
      votes.set(vote.memberId, vote.decision);
      await recordApprovalVote({ approvalRequestId: input.approvalRequestId, memberId: vote.memberId, decision: vote.decision, comment: vote.comment ?? '' });
      if (decision === undefined && (vote.decision === 'reject' || approvals() >= input.requiredApprovals)) {
        decision = vote.decision === 'reject' ? 'rejected' : 'approved';
        decidedBy = vote.memberId;
      }
      // The caller's answer reflects the outcome once it has been carried out.
      if (decision !== undefined) await condition(() => carriedOut);
      return state();
    },
    {
      validator: (vote) => {
        if (vote.memberId === input.requesterId) {
          throw ApplicationFailure.create({ type: VOTE_REFUSALS.requester, message: 'The requester cannot vote on their own activation request.' });
        }
        if (decision !== undefined) throw ApplicationFailure.create({ type: VOTE_REFUSALS.closed, message: `The approval request is already ${decision}.` });
        if (Date.now() >= expiresAtMs) throw ApplicationFailure.create({ type: VOTE_REFUSALS.expired, message: 'The approval request has expired.' });
      },
    },
  );

  const decidedInTime = await condition(() => decision !== undefined, Math.max(1, expiresAtMs - Date.now()));
  if (!decidedInTime) decision = 'expired';
  if (decision === 'approved') {
    await enforceApprovedPolicy({ approvalRequestId: input.approvalRequestId, decidedBy });
  } else {
    await closeApprovalRequest({ approvalRequestId: input.approvalRequestId, status: decision!, decidedBy });
  }
  carriedOut = true;
  await condition(allHandlersFinished);
  return state();
};
