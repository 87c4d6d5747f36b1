import { pendingWork, type PendingWorkSource } from '../temporal/reconciler';
import { ConsolidationRun } from './entities';
import { consolidationRunFlow } from './flows/run';

/** Runs not finished: each must have its `consolidation-run-<id>` workflow running (its rule waits on it). */
export const consolidationPendingWork: PendingWorkSource = {
  name: 'consolidation_run',
  pending: async (em, query) => {
    const runs = await em.find(
      ConsolidationRun,
      {
        status: { $in: ['pending', 'scanning', 'sweeping'] },
        createdAt: { $lt: query.olderThan },
        ...(query.organizationId ? { organization: query.organizationId } : {}),
      },
      { limit: query.limit, orderBy: { createdAt: 'asc' } },
    );
    return runs.map((run) => pendingWork(consolidationRunFlow, { runId: run.id }, run.organization.id));
  },
};
