import { cardPendingWork } from '../src/cards/pending-work';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { lightningPendingWork } from '../src/lightning/pending-work';
import type { Logger } from '../src/logger';
import { consolidationPendingWork } from '../src/consolidation/pending-work';
import { payoutTripPendingWork } from '../src/payouts/pending-work';
import { sponsorshipPendingWork } from '../src/gas-stations/pending-work';
import { transactionPendingWork } from '../src/transactions/pending-work';
import { reconcilePendingWork, type PendingWorkSource, type ReconcileResult } from '../src/temporal/reconciler';
import { activityStarter } from './with-starts';

export interface DurableWorkActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
}

/** Every domain's pending resources that a running workflow must be carrying. */
const PENDING_WORK_SOURCES: PendingWorkSource[] = [cardPendingWork, ...lightningPendingWork, transactionPendingWork, sponsorshipPendingWork, consolidationPendingWork, payoutTripPendingWork];

export const createDurableWorkActivities = (deps: DurableWorkActivityDeps) => ({
  /** Fires recorded workflow starts that were not fired after their commit; returns how many reached Temporal. */
  async sweepWorkflowStarts(input: { graceSeconds: number; organizationId?: string }): Promise<number> {
    return activityStarter(deps).sweep(deps.orm.em.fork(), input);
  },

  /** Restarts the workflow of any resource pending longer than `minAgeSeconds` with none running. */
  async reconcilePendingWorkflows(input: { minAgeSeconds: number; organizationId?: string; limit?: number }): Promise<ReconcileResult> {
    return reconcilePendingWork(deps.orm.em.fork(), activityStarter(deps), PENDING_WORK_SOURCES, {
      olderThan: new Date(Date.now() - input.minAgeSeconds * 1000),
      organizationId: input.organizationId,
      limit: input.limit ?? 500,
    });
  },
});
