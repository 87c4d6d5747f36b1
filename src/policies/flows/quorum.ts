import { allHandlersFinished, ApplicationFailure, condition, setHandler } from '@temporalio/workflow';
import { activationStateQuery, voteUpdate, VOTE_REFUSALS, type ActivationDecision, type ActivationState } from './activation';

/**
 * Workflow code (imported only under workflows/): the quorum every approval request follows,
 * whatever it approves. Votes arrive as the `vote` update until the required approvals are reached
 * (approved), someone rejects (rejected) or expires_at passes (expired); then `carryOut` applies
 * the decision. The expiry is a durable timer, not a date check alone.
 */
export interface QuorumInput {
  approvalRequestId: string;
  /** Member id (or API key id) of the requester, who cannot vote. */
  requesterId: string;
  requiredApprovals: number;
  expiresAt: string;
}

export interface QuorumSteps {
  /** Records one member's vote (an idempotent activity). */
  recordVote(vote: { approvalRequestId: string; memberId: string; apiKeyId?: string; decision: 'approve' | 'reject'; comment: string }): Promise<unknown>;
  /** Carries out the decision (idempotent activities); `decidedBy` is the member whose vote decided, none at expiry. */
  carryOut(decision: ActivationDecision, decidedBy: string | undefined): Promise<void>;
}

export async function collectApprovals(input: QuorumInput, steps: QuorumSteps): Promise<ActivationState> {
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
      await steps.recordVote({
        approvalRequestId: input.approvalRequestId,
        memberId: vote.memberId,
        ...(vote.apiKeyId ? { apiKeyId: vote.apiKeyId } : {}),
        decision: vote.decision,
        comment: vote.comment ?? '',
      });
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
          throw ApplicationFailure.create({ type: VOTE_REFUSALS.requester, message: 'The requester cannot vote on their own approval request.' });
        }
        if (decision !== undefined) throw ApplicationFailure.create({ type: VOTE_REFUSALS.closed, message: `The approval request is already ${decision}.` });
        if (Date.now() >= expiresAtMs) throw ApplicationFailure.create({ type: VOTE_REFUSALS.expired, message: 'The approval request has expired.' });
      },
    },
  );

  const decidedInTime = await condition(() => decision !== undefined, Math.max(1, expiresAtMs - Date.now()));
  if (!decidedInTime) decision = 'expired';
  await steps.carryOut(decision!, decidedBy);
  carriedOut = true;
  await condition(allHandlersFinished);
  return state();
}
