import { proxyActivities } from '@temporalio/workflow';
import type { createCardActivities } from '../activities/cards';
import type { cardBalanceFlow } from '../src/cards/flows/balance';
import type { WorkflowOf } from '../src/temporal/flow';

const { settleCardTransaction } = proxyActivities<ReturnType<typeof createCardActivities>>({
  // One issuer call and a short transaction.
  startToCloseTimeout: '1 minute',
  // Money moves here: retried until the issuer and the database answer, never given up (the settlement is idempotent).
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** `card-balance-<transactionId>`: settles one pending funding or withdrawal with the issuer. */
export const cardBalanceWorkflow: WorkflowOf<typeof cardBalanceFlow> = (input) => settleCardTransaction({ transactionId: input.transactionId });
