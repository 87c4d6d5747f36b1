import { allHandlersFinished, ApplicationFailure, condition, patched, setHandler } from '@temporalio/workflow';
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

type RecordedVote = { approvalRequestId: string; memberId: string; apiKeyId?: string; decision: 'approve' | 'reject'; comment: string };

/**
 * What became of a vote checked and recorded in one transaction: recorded (a member's repeat answers the decision recorded
 * first), refused as not independent of the requester or of a vote counted (with the origins it shares), or closed.
 */
export type VoteRecording = { recorded: 'approve' | 'reject' } | { refused: { message: string; sharedOrigins: string[] } } | { closed: string };

/**
 * Votes are checked for independence by the workflow, not the API, since this patch: the API once held a database
 * connection (and a lock) for as long as the workflow took to count a vote (issue 53). Histories recorded before it
 * replay through recordVote.
 */
export const INDEPENDENT_VOTES_PATCH = 'votes-checked-when-recorded';

export interface QuorumSteps {
  /** Records one member's vote (an idempotent activity); votes counted before INDEPENDENT_VOTES_PATCH. */
  recordVote(vote: RecordedVote): Promise<unknown>;
  /** Checks the vote's independence and records it, in one transaction under the request's row lock (an idempotent activity). */
  recordIndependentVote(vote: RecordedVote): Promise<VoteRecording>;
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
      const recorded: RecordedVote = {
        approvalRequestId: input.approvalRequestId,
        memberId: vote.memberId,
        ...(vote.apiKeyId ? { apiKeyId: vote.apiKeyId } : {}),
        decision: vote.decision,
        comment: vote.comment ?? '',
      };
      if (patched(INDEPENDENT_VOTES_PATCH)) {
        const outcome = await steps.recordIndependentVote(recorded);
        if ('refused' in outcome) {
          throw ApplicationFailure.create({ type: VOTE_REFUSALS.notIndependent, message: outcome.refused.message, details: [outcome.refused.sharedOrigins] });
        }
        if ('closed' in outcome) throw ApplicationFailure.create({ type: VOTE_REFUSALS.closed, message: `The approval request is already ${outcome.closed}.` });
        // Another update of the same member's may have been recorded while this one waited: the first recorded counts.
        if (votes.has(vote.memberId)) return state();
        votes.set(vote.memberId, outcome.recorded);
      } else {
        votes.set(vote.memberId, vote.decision);
        await steps.recordVote(recorded);
      }
      if (decision === undefined && (votes.get(vote.memberId) === 'reject' || approvals() >= input.requiredApprovals)) {
        decision = votes.get(vote.memberId) === 'reject' ? 'rejected' : 'approved';
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
