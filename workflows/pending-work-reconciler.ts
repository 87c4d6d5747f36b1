import { proxyActivities } from '@temporalio/workflow';
import type { createDurableWorkActivities } from '../activities/durable-work';
import type { ReconcileResult } from '../src/temporal/reconciler';

const { reconcilePendingWorkflows } = proxyActivities<ReturnType<typeof createDurableWorkActivities>>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 5 },
});

export interface PendingWorkReconcilerInput {
  minAgeSeconds: number;
  organizationId?: string;
}

/**
 * Started every ten minutes by the `pending-work-reconciler` Schedule: any pending card, card
 * transaction, Lightning payment or send whose workflow is not running is started again. Its
 * result lists what it restarted, so the run itself shows what it found.
 */
export async function pendingWorkReconcilerWorkflow(input: PendingWorkReconcilerInput): Promise<ReconcileResult> {
  return reconcilePendingWorkflows(input);
}
