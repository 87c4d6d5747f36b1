/**
 * The Stripe Issuing reconciliation: Stripe's open authorizations and Issuing balance against our
 * live cards (src/cards/stripe-reconciliation.ts). Started by the `stripe-issuing-reconciliation`
 * Schedule when Stripe Issuing is configured. Workflow-safe: no Node APIs.
 */
export interface StripeIssuingReconciliationInput {
  /** Tests scope a pass to their own organization (and leave the platform's balance alone). */
  organizationId?: string;
}

export interface StripeIssuingReconciliationResult {
  authorizationsCompared: number;
  openDrifts: number;
}

export const stripeIssuingReconciliationWorkflowType = 'stripeIssuingReconciliationWorkflow';
export const STRIPE_ISSUING_RECONCILIATION_SCHEDULE_ID = 'stripe-issuing-reconciliation';
