import { ActivityFailure, continueAsNew, patched, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { createGasStationActivities } from '../activities/gas-stations';
import type { refillFlow } from '../src/gas-stations/flows/refill';
import { HISTORY_EVENTS_PER_RUN, type WorkflowOf } from '../src/temporal/flow';

type GasStationActivities = ReturnType<typeof createGasStationActivities>;

/** Assessing reads the chain and the station before money moves: never given up either; a node or database away for long is waited out. */
const { assessGasStation } = proxyActivities<GasStationActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});
/**
 * Submitting the send (idempotent: the station keeps the send it recorded), following it and recording
 * its outcome move money: never given up on an infrastructure error. Refusals come back as values.
 */
const { submitGasStationRefill, gasStationRefillStatus, finishGasStationRefill, reportGasStationRefillFailed } = proxyActivities<GasStationActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** The retry policy: 3 attempts, the second 1 minute after the first fails, the third 5 minutes after the second. */
export const REFILL_ATTEMPTS = 3;
const RETRY_DELAYS = ['1 minute', '5 minutes'] as const;
/** The send is checked every 10 s for its first 5 minutes (sandbox and Ethereum), then every minute (Bitcoin). */
const followInterval = (check: number) => (check <= 30 ? '10 seconds' : '1 minute');
/** Runs recorded before the follow loop continued as new followed the send in one run however long it took. */
const FOLLOW_CONTINUE_AS_NEW_PATCH = 'refill-follow-continues-as-new';

/**
 * `gas-station-refill-<stationId>`: one automatic refill of a station. Assesses it (auto-refill on,
 * balance read from the chain below threshold), emits gas_station.low_balance, submits
 * refill_amount from refill_from_wallet_id as a system send, and follows that send's status until
 * it settles: gas_station.refilled. A refused or failed send is retried by the policy above, the
 * station assessed again before each retry; after the last, gas_station.refill_failed.
 */
export const refillGasStationWorkflow: WorkflowOf<typeof refillFlow> = async ({ stationId, following }) => {
  const key = following?.key ?? workflowInfo().runId;
  if (!following) {
    const assessed = await assessGasStation({ stationId, announce: key });
    if (assessed.state !== 'low') return assessed.state;
  }
  let failure: { code: string; message: string; transaction_id?: string } = { code: 'not_attempted', message: '' };
  for (let attempt = following?.attempt ?? 1; attempt <= REFILL_ATTEMPTS; attempt += 1) {
    // A run continued as new while following picks up that attempt's send where it left off.
    const resumed = following?.attempt === attempt ? following : undefined;
    if (attempt > 1 && !resumed) {
      await sleep(RETRY_DELAYS[attempt - 2]!);
      const again = await assessGasStation({ stationId });
      if (again.state !== 'low') return again.state;
    }
    let submitted;
    try {
      submitted = resumed ?? (await submitGasStationRefill({ stationId }));
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      failure = { code: 'submit_failed', message: error.cause?.message ?? error.message };
      continue;
    }
    if ('refused' in submitted) {
      failure = submitted.refused;
      continue;
    }
    const { transactionId } = submitted;
    const firstCheck = resumed?.check ?? 1;
    for (let check = firstCheck; ; check += 1) {
      const status = await gasStationRefillStatus({ transactionId });
      if (status === 'confirmed' || status === 'failed') break;
      // About eleven events a check: a send unconfirmed for hours is followed across runs.
      if (workflowInfo().historyLength >= HISTORY_EVENTS_PER_RUN && patched(FOLLOW_CONTINUE_AS_NEW_PATCH)) {
        return continueAsNew<typeof refillGasStationWorkflow>({ stationId, following: { key, attempt, transactionId, check: check + 1 } });
      }
      await sleep(followInterval(check));
    }
    const status = await finishGasStationRefill({ stationId, transactionId });
    if (status === 'confirmed') return 'refilled';
    failure = { code: 'transaction_failed', message: `The refill send ${transactionId} failed.`, transaction_id: transactionId };
  }
  await reportGasStationRefillFailed({ stationId, key, failure: { attempts: REFILL_ATTEMPTS, ...failure } });
  return 'failed';
};
