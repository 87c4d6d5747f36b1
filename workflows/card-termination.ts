import { proxyActivities, sleep } from '@temporalio/workflow';
import type { createCardActivities } from '../activities/cards';
import type { cardTerminationFlow } from '../src/cards/flows/termination';
import type { WorkflowOf } from '../src/temporal/flow';

const { terminateCardAndReturnBalance } = proxyActivities<ReturnType<typeof createCardActivities>>({
  // One short transaction.
  startToCloseTimeout: '1 minute',
  // Money moves here: retried until the database answers (and any settlement in flight is done), never given up.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/**
 * `card-termination-<cardId>`: the request was accepted under the card lock, so this never
 * refuses. Started before the cooling period ends (clock skew, an operator), it waits for
 * `terminableAt` on a durable timer (workflow time), then returns the balance.
 */
export const cardTerminationWorkflow: WorkflowOf<typeof cardTerminationFlow> = async (input) => {
  const wait = Date.parse(input.terminableAt) - Date.now();
  if (wait > 0) await sleep(wait);
  return terminateCardAndReturnBalance({ cardId: input.cardId, terminatedAt: new Date().toISOString() });
};
