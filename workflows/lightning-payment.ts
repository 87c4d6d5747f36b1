import { continueAsNew, patched, proxyActivities, sleep } from '@temporalio/workflow';
import type { createLightningActivities, SerializedOutcome } from '../activities/lightning';
import type { lightningPaymentFlow } from '../src/lightning/flows/payment';
import type { WorkflowOf } from '../src/temporal/flow';

const activities = proxyActivities<ReturnType<typeof createLightningActivities>>({
  // A slow remote node may take a few seconds; the rest are small transactions.
  startToCloseTimeout: '2 minutes',
  // Money never gives up: an outage (node, database) is retried for as long as it lasts, at most 5 min apart.
  // A refusal by design (a DomainError) is non-retryable by the activity interceptor.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

const MINUTE = 60_000;
/** Re-queries of an unknown outcome wait 10 s doubling to 10 min for about a day, then an hour. */
const QUERY_INITIAL_MS = 10_000;
const QUERY_SHORT_CAP_MS = 10 * MINUTE;
const QUERY_LONG_CAP_MS = 60 * MINUTE;
const QUERIES_AT_SHORT_CAP = 150;
/** A run continues as new after this many re-queries (about 11 history events each), so no run's history grows past ~1,200 events. */
export const QUERIES_PER_RUN = 100;
/** Runs recorded before continue-as-new existed keep their command sequence when replayed. */
const CONTINUE_AS_NEW_PATCH = 'lightning-payment-continue-as-new';
/** Runs recorded before send and finalize were one activity keep their command sequence when replayed. */
const SEND_AND_FINALIZE_PATCH = 'lightning-payment-send-and-finalize';

const waitBeforeQuery = (queryNumber: number) =>
  Math.min(QUERY_INITIAL_MS * 2 ** Math.min(queryNumber - 1, 20), queryNumber > QUERIES_AT_SHORT_CAP ? QUERY_LONG_CAP_MS : QUERY_SHORT_CAP_MS);

/**
 * One outgoing payment (amount plus fee limit already reserved by the API): send it, capturing
 * (paid) or releasing (failed) at once when the outcome is known; while it is unknown keep
 * re-querying on a durable timer, never refunding blind (rule 6), then capture or release exactly
 * once. A run that re-queried QUERIES_PER_RUN times continues as new, carrying the count (and that
 * the payment was sent).
 */
export const lightningPaymentWorkflow: WorkflowOf<typeof lightningPaymentFlow> = async (input) => {
  const queriedBefore = input.requeried?.queries ?? 0;
  let outcome: SerializedOutcome = { state: 'unknown' };
  if (!input.requeried) {
    if (patched(SEND_AND_FINALIZE_PATCH)) {
      // A known outcome (every internal payment's) is settled by the same activity that sent it.
      const sent = await activities.sendAndFinalizeLightningPayment({ paymentId: input.paymentId });
      if (sent.state === 'finalized') return sent.status;
    } else {
      outcome = await activities.sendLightningPayment({ paymentId: input.paymentId });
    }
  }
  for (let queryNumber = queriedBefore + 1; outcome.state === 'unknown'; queryNumber += 1) {
    if (queryNumber - queriedBefore > QUERIES_PER_RUN && patched(CONTINUE_AS_NEW_PATCH)) {
      return continueAsNew<typeof lightningPaymentWorkflow>({ paymentId: input.paymentId, requeried: { queries: queryNumber - 1 } });
    }
    await sleep(waitBeforeQuery(queryNumber));
    outcome = await activities.queryLightningPayment({ paymentId: input.paymentId, queryNumber });
  }
  return activities.finalizeLightningPayment({ paymentId: input.paymentId, outcome });
};
