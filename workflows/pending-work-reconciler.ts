import { continueAsNew, patched, proxyActivities } from '@temporalio/workflow';
import type { createDurableWorkActivities, ReconcilePosition } from '../activities/durable-work';
import { HISTORY_EVENTS_PER_RUN } from '../src/temporal/flow';
import type { ReconcileResult } from '../src/temporal/reconciler';

const { reconcilePendingWorkPage, reconcilePendingWorkflows } = proxyActivities<ReturnType<typeof createDurableWorkActivities>>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 5 },
});

/** Runs recorded before the reconciler paged read only the first page of each source, in one activity. */
const PAGES_PATCH = 'reconciler-pages-through-every-pending-row';
const PAGE_SIZE = 500;
/** Six events a page: a run continues as new before HISTORY_EVENTS_PER_RUN (its replay cost is in docs/durable-work.md). */
const PAGES_PER_RUN = Math.floor(HISTORY_EVENTS_PER_RUN / 6) - 2;
/** The restarted workflow ids a run carries into its result; the log and each start row's `restarts` have every one. */
const RESTARTED_LISTED = 1_000;

export interface PendingWorkReconcilerInput {
  minAgeSeconds: number;
  organizationId?: string;
  /** Rows a page (one activity call); default 500. */
  pageSize?: number;
  /** Pages before the run continues as new; default 81 (about 490 events). */
  pagesPerRun?: number;
  /** Set by continue-as-new: where the previous run stopped, and what the reconciliation found so far. */
  resume?: { olderThan: string; position: ReconcilePosition; checked: number; restarted: string[] };
}

/**
 * Started every ten minutes by the `pending-work-reconciler` Schedule: any pending card, card
 * transaction, Lightning payment, send, sponsorship, consolidation run, payout trip or payout
 * refund whose workflow is not running is started again. It pages through every pending row of every source, oldest
 * first, a page per activity, continuing as new every `pagesPerRun` pages; its result lists what it
 * restarted, so the run itself shows what it found.
 */
export async function pendingWorkReconcilerWorkflow(input: PendingWorkReconcilerInput): Promise<ReconcileResult> {
  if (!patched(PAGES_PATCH)) return reconcilePendingWorkflows(input);
  const olderThan = input.resume?.olderThan ?? new Date(Date.now() - input.minAgeSeconds * 1000).toISOString();
  const result: ReconcileResult = { checked: input.resume?.checked ?? 0, restarted: input.resume?.restarted ?? [] };
  let position = input.resume?.position;
  for (let pages = 0; pages < (input.pagesPerRun ?? PAGES_PER_RUN); pages += 1) {
    const page = await reconcilePendingWorkPage({ olderThan, organizationId: input.organizationId, limit: input.pageSize ?? PAGE_SIZE, position });
    result.checked += page.checked;
    result.restarted = [...result.restarted, ...page.restarted].slice(0, RESTARTED_LISTED);
    if (!page.next) return result;
    position = page.next;
  }
  return continueAsNew<typeof pendingWorkReconcilerWorkflow>({ ...input, resume: { olderThan, position: position!, ...result } });
}
