import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { createConsolidationActivities } from '../activities/consolidation';
import type { consolidationRunFlow } from '../src/consolidation/flows/run';
import type { WorkflowOf } from '../src/temporal/flow';

const activities = proxyActivities<ReturnType<typeof createConsolidationActivities>>({
  // A planning step reads up to 200 addresses' balances from the node; a submission step makes up to 25 sends.
  startToCloseTimeout: '5 minutes',
  // Planning and submitting heartbeat as they go: a step on a worker that died is retried after this, not after the
  // five minutes. The other steps are a few statements each, well within it.
  heartbeatTimeout: '30 seconds',
  // Money never gives up: an outage (node, database) is retried for as long as it lasts, at most 5 min apart.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** Pages planned per run before it continues as new: history stays bounded however large the vault (10,000 addresses are 50 pages). */
export const PAGES_PER_RUN = 20;
/** Waits for the sweeps' confirmations per run: every 5 s for 5 minutes, then every 30 s. */
export const WAITS_PER_RUN = 200;

/**
 * `consolidation-run-<id>`: scans the vault's addresses on the chain one page at a time, plans
 * each page's sweeps and submits them through the sending machinery (each send its own
 * `transaction-<id>` workflow), then follows them until every one is confirmed or failed, and
 * ends the run completed, partially_failed or failed. Each step is idempotent and reads where the
 * run stands from the database, so a restarted worker, a retried step or a run continued as new
 * carries on without doubling a sweep.
 */
export const consolidationRunWorkflow: WorkflowOf<typeof consolidationRunFlow> = async (input) => {
  const { runId } = input;
  const status = await activities.startConsolidationRun({ runId });
  if (status === 'completed' || status === 'partially_failed' || status === 'failed') return status;
  if (input.resume?.phase !== 'following') {
    let cursor: string | null = input.resume?.cursor ?? null;
    for (let pages = 1; ; pages += 1) {
      const page = await activities.planConsolidationPage({ runId, cursor });
      while ((await activities.submitConsolidationSweeps({ runId })).remaining > 0);
      cursor = page.next;
      if (cursor === null) break;
      if (pages >= PAGES_PER_RUN) return continueAsNew<typeof consolidationRunWorkflow>({ runId, resume: { phase: 'scanning', cursor } });
    }
    await activities.finishConsolidationScan({ runId });
  }
  for (let waits = 0; ; waits += 1) {
    const { inFlight } = await activities.followConsolidationSweeps({ runId });
    if (inFlight === 0) break;
    if (waits >= WAITS_PER_RUN) return continueAsNew<typeof consolidationRunWorkflow>({ runId, resume: { phase: 'following' } });
    await sleep(waits < 60 ? '5 seconds' : '30 seconds');
  }
  return activities.finishConsolidationRun({ runId });
};
