import { proxyActivities } from '@temporalio/workflow';
import type { createEventActivities } from '../activities/events';

const { dispatchUndispatchedDeliveries } = proxyActivities<ReturnType<typeof createEventActivities>>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

/**
 * Started every minute by the `webhook-delivery-sweep` Schedule: starts the delivery workflows of
 * committed events whose after-commit dispatch never happened (process died, Temporal was down).
 */
export async function webhookDeliverySweepWorkflow(input: { graceSeconds: number }): Promise<{ dispatched: number }> {
  return { dispatched: await dispatchUndispatchedDeliveries(input) };
}
