import { patched, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { createCardActivities } from '../activities/cards';
import type { cardBalanceFlow } from '../src/cards/flows/balance';
import type { WorkflowOf } from '../src/temporal/flow';

type CardActivities = ReturnType<typeof createCardActivities>;

/** One issuer call and a short transaction. */
const SETTLEMENT_TIMEOUT = '1 minute';
/** Money moves here: retried until the issuer and the database answer, never given up (the settlement is idempotent). */
const SETTLEMENT_RETRY = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' } as const;

const { settleCardTransaction } = proxyActivities<CardActivities>({ startToCloseTimeout: SETTLEMENT_TIMEOUT, retry: SETTLEMENT_RETRY });
/**
 * The same settlement as a local activity: it runs inside the workflow task that starts the run, so a
 * funding is one workflow task instead of two plus an activity task (no activity scheduled, polled and
 * reported through the server). It is as safe as the activity: a worker lost mid-settlement has its
 * workflow task time out and the settlement run again on another worker, and the settlement is
 * idempotent; retries past a minute's backoff wait on a durable timer, and still never give up.
 */
const { settleCardTransaction: settleCardTransactionLocally } = proxyLocalActivities<CardActivities>({
  startToCloseTimeout: SETTLEMENT_TIMEOUT,
  retry: SETTLEMENT_RETRY,
});

/** Runs recorded before the settlement became a local activity keep their command sequence when replayed. */
const LOCAL_SETTLEMENT_PATCH = 'card-balance-local-settlement';

/** `card-balance-<transactionId>`: settles one pending funding or withdrawal with the issuer. */
export const cardBalanceWorkflow: WorkflowOf<typeof cardBalanceFlow> = (input) =>
  (patched(LOCAL_SETTLEMENT_PATCH) ? settleCardTransactionLocally : settleCardTransaction)({ transactionId: input.transactionId });
