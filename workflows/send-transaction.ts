import { continueAsNew, patched, proxyActivities, sleep } from '@temporalio/workflow';
import type { createTransactionActivities } from '../activities/transactions';
import type { transactionFlow } from '../src/transactions/flows/transaction';
import type { WorkflowOf } from '../src/temporal/flow';

const activities = proxyActivities<ReturnType<typeof createTransactionActivities>>({
  // Each step is one node call and a small database transaction.
  startToCloseTimeout: '1 minute',
  // Money never gives up: an outage (node, database) is retried for as long as it lasts, at most 5 min apart.
  // A refusal by design (a DomainError) is non-retryable by the activity interceptor.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/**
 * The first 60 checks come every `checkSeconds` (CHAIN_CHECK_SECONDS, 5 s by default: sandbox and Ethereum blocks),
 * then every 30 s (Bitcoin's blocks are 10 min).
 */
const FAST_CHECKS = 60;
/** The pace of runs recorded before CHAIN_CHECK_SECONDS existed (their input has none): its default, which they ran at. */
export const CHECK_SECONDS_OF_EARLIER_RUNS = 5;
const checkInterval = (check: number, checkSeconds = CHECK_SECONDS_OF_EARLIER_RUNS) => (check <= FAST_CHECKS ? checkSeconds * 1000 : '30 seconds');
/** Runs recorded before fee bumping never saw a check answer `replace`; the marker keeps that visible in their histories. */
export const FEE_BUMPING_PATCH = 'fee-bumping';

/** A run continues as new after this many checks (about 8 history events each), so no history grows past ~1,700 events. */
export const CHECKS_PER_RUN = 200;

/**
 * One send, its funds already locked by the API: sign once (the bytes and hash stored before any
 * broadcast), broadcast those bytes until a node has them, then follow them to the chain's
 * confirmation count and settle once. An unknown outcome (a node that timed out) is only ever
 * re-queried and re-broadcast with the very same bytes, which can never spend twice; the lock is
 * released only when the transaction is provably not in the chain (refused, and unknown to the node).
 * A replacement (the same nonce at a higher fee) is one more candidate: the checks follow them all
 * and the send settles on the one mined.
 */
export const sendTransactionWorkflow: WorkflowOf<typeof transactionFlow> = async (input) => {
  const { transactionId } = input;
  const checkedBefore = input.checked ?? 0;
  if (input.checked === undefined) {
    const signed = await activities.signTransaction({ transactionId });
    if (signed === 'confirmed' || signed === 'failed') return signed;
    const broadcast = await activities.broadcastTransaction({ transactionId });
    if (broadcast === 'confirmed' || broadcast === 'failed') return broadcast;
  }
  for (let check = checkedBefore + 1; ; check += 1) {
    if (check - checkedBefore > CHECKS_PER_RUN) return continueAsNew<typeof sendTransactionWorkflow>({ transactionId, checked: check - 1, checkSeconds: input.checkSeconds });
    await sleep(checkInterval(check, input.checkSeconds));
    const state = await activities.checkTransaction({ transactionId });
    if (state === 'confirmed' || state === 'failed') return state;
    if (state === 'settle') return activities.settleTransaction({ transactionId });
    if (state === 'replace' && patched(FEE_BUMPING_PATCH)) {
      // A replacement asked for (speed-up, cancel) or an automatic bump: signed once and broadcast; the next checks follow every candidate.
      const replaced = await activities.replaceTransaction({ transactionId });
      if (replaced === 'confirmed' || replaced === 'failed') return replaced;
    }
    if (state === 'missing') {
      // Not in the node's mempool or chain (dropped, reorganised out, or a broadcast that never arrived): the same bytes again.
      const broadcast = await activities.broadcastTransaction({ transactionId });
      if (broadcast === 'confirmed' || broadcast === 'failed') return broadcast;
    }
  }
};
