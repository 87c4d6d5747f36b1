import type { EntityManager } from '@mikro-orm/postgresql';
import type { Flow } from './flow';
import { recordStart, type WorkflowStarter } from './starter';
import { WorkflowStart } from './entities';

/** A pending resource and the start of the workflow that should be carrying it. */
export interface PendingWork {
  workflowId: string;
  /** Records the start afresh (for a resource whose start row is missing). */
  record: (em: EntityManager) => WorkflowStart;
}

export const pendingWork = <Input, Result>(flow: Flow<Input, Result>, input: Input, organizationId: string | null): PendingWork => ({
  workflowId: flow.workflowId(input),
  record: (em) => recordStart(em, flow, input, organizationId),
});

export interface PendingWorkQuery {
  /** Only resources pending since before this (younger ones are still being started normally). */
  olderThan: Date;
  organizationId?: string;
  limit: number;
}

/** A domain's pending resources that a workflow must be carrying (pending cards, payments...). */
export interface PendingWorkSource {
  name: string;
  pending: (em: EntityManager, query: PendingWorkQuery) => Promise<PendingWork[]>;
}

export interface ReconcileResult {
  checked: number;
  restarted: string[];
}

/**
 * Finds pending resources whose workflow is not running (never started, or ended without settling
 * them) and starts it again, visibly: the restart is counted on the start row, logged, and the new
 * run carries a `restarted_by: reconciler` memo in the Temporal UI. Safe because every money
 * activity is idempotent: a restarted flow re-reads the state and carries on from it.
 */
export async function reconcilePendingWork(
  em: EntityManager,
  starter: WorkflowStarter,
  sources: PendingWorkSource[],
  query: PendingWorkQuery,
): Promise<ReconcileResult> {
  const result: ReconcileResult = { checked: 0, restarted: [] };
  for (const source of sources) {
    for (const work of await source.pending(em.fork(), query)) {
      result.checked += 1;
      if (await starter.isRunning(work.workflowId)) continue;
      const reason = `${source.name} still pending with no running workflow`;
      // A resource without a start row (pending from before the outbox) gets one, then the same visible restart.
      if (!(await em.fork().findOne(WorkflowStart, { workflowId: work.workflowId }))) {
        await em.fork().transactional(async (tx) => void work.record(tx));
      }
      if (await starter.restart(em.fork(), work.workflowId, reason)) result.restarted.push(work.workflowId);
    }
  }
  return result;
}
