/** Every workflow the worker runs; the bundle's entry point. */
export { idempotencyRetentionWorkflow } from './idempotency-retention';
export { webhookDeliveryWorkflow } from './webhook-delivery';
export { webhookDeliverySweepWorkflow } from './webhook-delivery-sweep';
export { policyActivationWorkflow } from './policy-activation';
export { lightningInvoiceWorkflow, lightningPaymentWorkflow } from './lightning';
export { cardBalanceWorkflow, cardProvisioningWorkflow, cardTerminationWorkflow } from './cards';
