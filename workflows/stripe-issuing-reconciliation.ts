import { proxyActivities } from '@temporalio/workflow';
import type { createCardActivities } from '../activities/cards';
import type { StripeIssuingReconciliationInput, StripeIssuingReconciliationResult } from '../src/cards/flows/issuer-reconciliation';

const { reconcileStripeIssuing } = proxyActivities<ReturnType<typeof createCardActivities>>({
  // Pages through Stripe's pending authorizations (100 a request) and reads our cards' charges once.
  startToCloseTimeout: '10 minutes',
  // Stripe or the database away: waited out; the Schedule skips its ticks meanwhile (overlap SKIP).
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Started by the `stripe-issuing-reconciliation` Schedule: compares Stripe Issuing with our cards, raising card_issuer.drift where they differ. */
export async function stripeIssuingReconciliationWorkflow(input: StripeIssuingReconciliationInput): Promise<StripeIssuingReconciliationResult> {
  return reconcileStripeIssuing(input);
}
