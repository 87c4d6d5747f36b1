import { allHandlersFinished, condition, continueAsNew, patched, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { createMonitoringActivities } from '../activities/monitoring';
import { chainAdvancedSignal, scanThroughUpdate, type chainScanFlow } from '../src/monitoring/flows/chain-scan';
import { HISTORY_EVENTS_PER_RUN, type WorkflowOf } from '../src/temporal/flow';

const activities = proxyActivities<ReturnType<typeof createMonitoringActivities>>({
  // One pass reads at most BLOCKS_PER_PASS blocks from the node.
  startToCloseTimeout: '5 minutes',
  // A heartbeat per block: a pass on a worker that died is retried after this, not after the five minutes.
  heartbeatTimeout: '30 seconds',
  // Crediting never gives up: a database or node outage is retried for as long as it lasts, at
  // most 10 s apart, so deposits are credited within seconds of its end (a pass is one cheap read
  // when there is nothing new; the interval is not part of the recorded commands).
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

const BLOCKS_PER_PASS = 100;
/** Passes per run of runs recorded before the events bound: at eight or more events a pass, 4,000 and more events. */
const PASSES_PER_RUN = 500;
/** Runs recorded before it continued as new by history length, every PASSES_PER_RUN passes only. */
const EVENTS_BOUND_PATCH = 'chain-scan-continues-as-new-by-events';

/**
 * Scans one chain in one environment for as long as the service runs: a pass, then (once caught
 * up) a wait for the interval or a wake-up signal. The cursor lives in PostgreSQL, so a restart
 * of the worker or of this workflow neither misses nor repeats a block.
 */
export const chainScanWorkflow: WorkflowOf<typeof chainScanFlow> = async (input) => {
  let wake = false;
  let processed: number | null = null;
  setHandler(chainAdvancedSignal, () => {
    wake = true;
  });
  setHandler(scanThroughUpdate, async ({ height, waitSeconds }) => {
    wake = true;
    const reached = await condition(() => processed !== null && processed >= height, `${waitSeconds} seconds`);
    return { height: processed, reached };
  });
  for (let pass = 0; pass < PASSES_PER_RUN; pass += 1) {
    const result = await activities.scanChain({ chain: input.chain, environment: input.environment, maxBlocks: BLOCKS_PER_PASS });
    processed = result.height;
    if (result.caughtUp && !wake) await condition(() => wake, `${input.intervalSeconds} seconds`);
    wake = false;
    // Signals and updates add events too: the bound is the history's length, not the passes. Not
    // while an update waits for a height: only this run's next passes can reach it.
    if (workflowInfo().historyLength >= HISTORY_EVENTS_PER_RUN && allHandlersFinished() && patched(EVENTS_BOUND_PATCH)) break;
  }
  await condition(allHandlersFinished);
  return continueAsNew<typeof chainScanWorkflow>(input);
};
