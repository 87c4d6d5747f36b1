import type { EntityManager, FilterQuery } from '@mikro-orm/postgresql';
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

/** Where a source's next page starts: after this row, in (created_at, id) order. */
export interface PendingCursor {
  createdAt: string;
  id: string;
}

export interface PendingWorkQuery {
  /** Only resources pending since before this (younger ones are still being started normally). */
  olderThan: Date;
  organizationId?: string;
  limit: number;
  /** Absent for the first page. */
  after?: PendingCursor;
}

/** One page of a source's pending work; `next` is absent on its last page. */
export interface PendingWorkPage {
  work: PendingWork[];
  next?: PendingCursor;
}

/** A domain's pending resources that a workflow must be carrying (pending cards, payments...), a page at a time. */
export interface PendingWorkSource {
  name: string;
  pending: (em: EntityManager, query: PendingWorkQuery) => Promise<PendingWorkPage>;
}

/**
 * One page of an entity's pending rows (`where`, scoped to the query's organization), oldest first
 * by keyset over (created_at, id): every row is reached however many stay pending before it, at
 * constant cost per page. Timestamps are written by the service (millisecond Dates), so a cursor's
 * ISO instant equals its row's.
 */
export async function pendingRows<T extends { id: string; createdAt: Date }>(
  em: EntityManager,
  entity: new (...args: never[]) => T,
  where: FilterQuery<T>,
  query: PendingWorkQuery,
): Promise<{ rows: T[]; next?: PendingCursor }> {
  const conditions: unknown[] = [where];
  if (query.organizationId) conditions.push({ organization: query.organizationId });
  if (query.after) {
    const at = new Date(query.after.createdAt);
    conditions.push({ $or: [{ createdAt: { $gt: at } }, { createdAt: at, id: { $gt: query.after.id } }] });
  }
  const rows = await em.find(entity, { $and: conditions } as FilterQuery<T>, { orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] as never, limit: query.limit });
  const last = rows[rows.length - 1];
  return { rows, next: rows.length === query.limit && last ? { createdAt: last.createdAt.toISOString(), id: last.id } : undefined };
}

export interface ReconcileResult {
  checked: number;
  restarted: string[];
}

/**
 * Finds pending resources whose workflow is not running (never started, or ended without settling
 * them) in one page of a source and starts it again, visibly: the restart is counted on the start
 * row, logged, and the new run carries a `restarted_by: reconciler` memo in the Temporal UI. Safe
 * because every money activity is idempotent: a restarted flow re-reads the state and carries on from it.
 */
export async function reconcilePendingPage(
  em: EntityManager,
  starter: WorkflowStarter,
  source: PendingWorkSource,
  query: PendingWorkQuery,
): Promise<ReconcileResult & { next?: PendingCursor }> {
  const result: ReconcileResult = { checked: 0, restarted: [] };
  const page = await source.pending(em.fork(), query);
  for (const work of page.work) {
    result.checked += 1;
    if (await starter.isRunning(work.workflowId)) continue;
    const reason = `${source.name} still pending with no running workflow`;
    // A resource without a start row (pending from before the outbox) gets one, then the same visible restart.
    if (!(await em.fork().findOne(WorkflowStart, { workflowId: work.workflowId }))) {
      await em.fork().transactional(async (tx) => void work.record(tx));
    }
    if (await starter.restart(em.fork(), work.workflowId, reason)) result.restarted.push(work.workflowId);
  }
  return { ...result, next: page.next };
}
