import { cardPendingWork } from '../src/cards/pending-work';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { lightningPendingWork } from '../src/lightning/pending-work';
import type { Logger } from '../src/logger';
import { consolidationPendingWork } from '../src/consolidation/pending-work';
import { payoutRefundPendingWork, payoutTripPendingWork } from '../src/payouts/pending-work';
import { sponsorshipPendingWork } from '../src/gas-stations/pending-work';
import { transactionPendingWork } from '../src/transactions/pending-work';
import { reconcilePendingPage, type PendingCursor, type PendingWorkSource, type ReconcileResult } from '../src/temporal/reconciler';
import { activityStarter } from './with-starts';

export interface DurableWorkActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
}

/** Every domain's pending resources that a running workflow must be carrying, in the order the reconciler pages through them. */
const PENDING_WORK_SOURCES: PendingWorkSource[] = [...cardPendingWork, ...lightningPendingWork, transactionPendingWork, sponsorshipPendingWork, consolidationPendingWork, payoutTripPendingWork, payoutRefundPendingWork];

/** Where the reconciler is: a source (by name) and, past its first page, the row its next page starts after. */
export interface ReconcilePosition {
  source: string;
  after?: PendingCursor;
}

export interface ReconcilePageInput {
  /** Resources pending since before this instant (ISO), fixed for a whole reconciliation. */
  olderThan: string;
  organizationId?: string;
  limit: number;
  /** Absent: the first page of the first source. */
  position?: ReconcilePosition;
}

export const createDurableWorkActivities = (deps: DurableWorkActivityDeps) => ({
  /** Fires recorded workflow starts that were not fired after their commit; returns how many reached Temporal. */
  async sweepWorkflowStarts(input: { graceSeconds: number; organizationId?: string }): Promise<number> {
    return activityStarter(deps).sweep(deps.orm.em.fork(), input);
  },

  /**
   * Restarts the workflow of any resource in one page of pending rows with none running; `next` is
   * where the following page starts (the next source once this one is exhausted), absent after the last.
   */
  async reconcilePendingWorkPage(input: ReconcilePageInput): Promise<ReconcileResult & { next?: ReconcilePosition }> {
    // A source no longer listed (renamed by a deploy between pages) restarts the walk: reconciling twice is harmless.
    const index = Math.max(0, PENDING_WORK_SOURCES.findIndex((source) => source.name === input.position?.source));
    const source = PENDING_WORK_SOURCES[index]!;
    const { next, ...result } = await reconcilePendingPage(deps.orm.em.fork(), activityStarter(deps), source, {
      olderThan: new Date(input.olderThan),
      organizationId: input.organizationId,
      limit: input.limit,
      after: input.position?.after,
    });
    const following = PENDING_WORK_SOURCES[index + 1];
    return { ...result, next: next ? { source: source.name, after: next } : following && { source: following.name } };
  },

  /** The first page (`limit` rows) of every source: what reconciler runs started before paging call. */
  async reconcilePendingWorkflows(input: { minAgeSeconds: number; organizationId?: string; limit?: number }): Promise<ReconcileResult> {
    const result: ReconcileResult = { checked: 0, restarted: [] };
    for (const source of PENDING_WORK_SOURCES) {
      const page = await reconcilePendingPage(deps.orm.em.fork(), activityStarter(deps), source, {
        olderThan: new Date(Date.now() - input.minAgeSeconds * 1000),
        organizationId: input.organizationId,
        limit: input.limit ?? 500,
      });
      result.checked += page.checked;
      result.restarted.push(...page.restarted);
    }
    return result;
  },
});
