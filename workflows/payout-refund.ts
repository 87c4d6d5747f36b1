import { continueAsNew, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { createPayoutActivities } from '../activities/payouts';
import type { payoutRefundFlow } from '../src/payouts/flows/refund';
import { HISTORY_EVENTS_PER_RUN, type WorkflowOf } from '../src/temporal/flow';

const activities = proxyActivities<ReturnType<typeof createPayoutActivities>>({
  // One step reads a send's status or makes a new send: seconds, not minutes.
  startToCloseTimeout: '1 minute',
  // Money never gives up: an outage (database, node) is retried for as long as it lasts, at most 5 min apart.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** The send is checked every 10 s for its first 5 minutes (sandbox and Ethereum blocks), then every minute (Bitcoin's). */
const followInterval = (check: number) => (check <= 30 ? '10 seconds' : '1 minute');
/** A failed send is replaced after this pause: a node refusing for a moment (fee spike, restart) may take the next one. */
const RESEND_DELAY = '5 minutes';

/**
 * `payout-refund-<refundId>`: follows a refund's send (its own `send-transaction-<id>` carries it to
 * the chain) until it settles: refunded. A send proven failed is replaced by a new one while
 * attempts are left; after the last the refund is refund_failed and its money held for an operator.
 * Every step reads where the refund stands from the database and is idempotent.
 */
export const payoutRefundWorkflow: WorkflowOf<typeof payoutRefundFlow> = async ({ refundId }) => {
  for (let check = 1; ; check += 1) {
    const progress = await activities.followPayoutRefund({ refundId });
    if (progress.status !== 'refund_pending') return progress.status;
    if (progress.send === 'failed') {
      await sleep(RESEND_DELAY);
      await activities.resendPayoutRefund({ refundId, attempt: progress.attempts });
      continue;
    }
    // About eleven events a check: a send unconfirmed for hours is followed across runs.
    if (workflowInfo().historyLength >= HISTORY_EVENTS_PER_RUN) return continueAsNew<typeof payoutRefundWorkflow>({ refundId });
    await sleep(followInterval(check));
  }
};
