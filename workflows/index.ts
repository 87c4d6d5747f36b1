/** Every workflow the worker runs; the bundle's entry point. */
export { idempotencyRetentionWorkflow } from './idempotency-retention';
export { webhookDeliveryWorkflow } from './webhook-delivery';
export { workflowStartSweepWorkflow } from './workflow-start-sweep';
export { pendingWorkReconcilerWorkflow } from './pending-work-reconciler';
export { policyActivationWorkflow } from './policy-activation';
export { lightningInvoiceWorkflow } from './lightning-invoice';
export { lightningPaymentWorkflow } from './lightning-payment';
export { cardBalanceWorkflow, cardProvisioningWorkflow, cardTerminationWorkflow } from './cards';
