import { pendingRows, pendingWork, type PendingWorkSource } from '../temporal/reconciler';
import { ConsolidationRun } from './entities';
import { consolidationRunFlow } from './flows/run';

/** Runs not finished: each must have its `consolidation-run-<id>` workflow running (its rule waits on it). */
export const consolidationPendingWork: PendingWorkSource = {
  name: 'consolidation_run',
  pending: async (em, query) => {
    const { rows, next } = await pendingRows(em, ConsolidationRun, { status: { $in: ['pending', 'scanning', 'sweeping'] }, createdAt: { $lt: query.olderThan } }, query);
    return { work: rows.map((run) => pendingWork(consolidationRunFlow, { runId: run.id }, run.organization.id)), next };
  },
};
