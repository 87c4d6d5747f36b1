/** Every workflow the worker runs; the bundle's entry point. */
export { idempotencyRetentionWorkflow } from './idempotency-retention';
export { webhookDeliveryWorkflow } from './webhook-delivery';
export { webhookDeliverySweepWorkflow } from './webhook-delivery-sweep';
export { cardBalanceWorkflow, cardProvisioningWorkflow, cardTerminationWorkflow } from './cards';
