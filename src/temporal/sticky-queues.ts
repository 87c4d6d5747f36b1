import type { Client } from '@temporalio/client';
import type { Logger } from '../logger';

/** Resets in flight at once: enough to release a few thousand workflows in seconds without crowding the server. */
const CONCURRENT_RESETS = 32;

/**
 * Called by a starting worker before it polls: every running workflow of its task queues forgets the worker that
 * last ran it (ResetStickyTaskQueue), so its next task goes to the queue every worker polls. A worker that crashed
 * leaves its workflows bound to its sticky queue, which nothing polls any more; the server moves a task from it
 * only after the sticky schedule-to-start timeout, which it counts in whole seconds, so without this every
 * long-lived workflow's first task after a restart waited at least a second (bench/worker-restart.ts). A workflow
 * a live replica holds loses only its cache affinity: its next task replays its history on whichever worker
 * takes it. A workflow the listing misses (visibility lags its start by a moment) falls back to that timeout.
 * Nothing here is needed for correctness, so a failure is logged and the worker starts anyway.
 */
export async function releaseStickyQueues(client: Client, taskQueues: string[], log: Logger): Promise<void> {
  const started = Date.now();
  const query = `ExecutionStatus = 'Running' AND (${taskQueues.map((queue) => `TaskQueue = '${queue.replaceAll("'", "\\'")}'`).join(' OR ')})`;
  let released = 0;
  let failed = 0;
  const inFlight = new Set<Promise<void>>();
  const reset = (workflowId: string, runId: string) =>
    client.workflowService
      .resetStickyTaskQueue({ namespace: client.options.namespace, execution: { workflowId, runId } })
      .then(() => void (released += 1))
      // Closed since it was listed, or a transient error: its next task waits out the timeout instead.
      .catch(() => void (failed += 1));
  try {
    for await (const execution of client.workflow.list({ query })) {
      const call = reset(execution.workflowId, execution.runId).finally(() => inFlight.delete(call));
      inFlight.add(call);
      if (inFlight.size >= CONCURRENT_RESETS) await Promise.race(inFlight);
    }
  } catch (error) {
    log.warn({ err: error instanceof Error ? error.message : String(error) }, 'could not list the running workflows to release their sticky queues');
  }
  await Promise.all(inFlight);
  log.info({ task_queues: taskQueues, released, failed, ms: Date.now() - started }, 'released the running workflows from the sticky queues of earlier workers');
}
