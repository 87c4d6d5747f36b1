/** Every workflow the worker runs; the bundle's entry point. */
export { idempotencyRetentionWorkflow } from './idempotency-retention';
export { policyActivationWorkflow } from './policy-activation';
