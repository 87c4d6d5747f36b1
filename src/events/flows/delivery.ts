import { defineSignal } from '@temporalio/workflow';
import { defineFlow } from '../../temporal/flow';

/**
 * The webhook delivery flow: one workflow per delivery and run (a manual retry of a finished
 * delivery is the next run). Shared by the events domain, which records its start, and
 * workflows/webhook-delivery.ts. Workflow-safe: no Node APIs.
 */
export interface DeliveryWorkflowInput {
  deliveryId: string;
  run: number;
  maxAttempts: number | null;
}

export interface DeliveryRunResult {
  outcome: 'delivered' | 'failed' | 'gone' | 'stopped';
  attempts: number;
}

export const webhookDeliveryFlow = defineFlow<DeliveryWorkflowInput, DeliveryRunResult>({
  workflowType: 'webhookDeliveryWorkflow',
  workflowId: (input) => `webhook-delivery-${input.deliveryId}-${input.run}`,
  resource: (input) => ({ type: 'event_delivery', id: input.deliveryId }),
  // A run happens once; a second start of it is refused and counts as started.
  idReusePolicy: 'REJECT_DUPLICATE',
  idConflictPolicy: 'FAIL',
  // Its own queue and worker slots: deliveries retrying against dead endpoints never slow money flows.
  queue: 'webhooks',
});

/**
 * While its endpoint's circuit is open (docs/webhooks.md), a delivery that is not the endpoint's probe
 * waits: it is woken by `retryNowSignal` when the probe succeeds, and checks again this often in case
 * the probe delivery ended without success (another delivery then becomes the probe).
 */
export const PAUSED_CHECK_INTERVAL_MS = 30 * 60_000;

/** Manual retry of a pending delivery: attempt now instead of at next_retry_at. */
export const retryNowSignal = defineSignal('retryNow');
