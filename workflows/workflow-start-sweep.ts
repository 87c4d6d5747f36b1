import { proxyActivities } from '@temporalio/workflow';
import type { createDurableWorkActivities } from '../activities/durable-work';

const { sweepWorkflowStarts } = proxyActivities<ReturnType<typeof createDurableWorkActivities>>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

export interface WorkflowStartSweepInput {
  graceSeconds: number;
  /** Tests scope a sweep to their own organization. */
  organizationId?: string;
}

/**
 * Started every minute by the `workflow-start-sweep` Schedule: fires recorded workflow starts whose
 * after-commit firing never happened (process died between commit and start, Temporal was down).
 */
export async function workflowStartSweepWorkflow(input: WorkflowStartSweepInput): Promise<{ started: number }> {
  return { started: await sweepWorkflowStarts(input) };
}
