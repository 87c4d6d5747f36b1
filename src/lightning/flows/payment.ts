import { defineFlow } from '../../temporal/flow';
import type { InvoiceStatus } from '../entities';

/**
 * An outgoing payment's flow: send once, re-query an unknown outcome for as long as it takes,
 * then capture or release the reserve once. Shared by the Lightning service, which records its
 * start, and workflows/lightning-payment.ts. Workflow-safe: no Node APIs.
 */
export interface LightningPaymentInput {
  paymentId: string;
  /** Set when a run continues as new: the payment was sent and this many re-queries answered unknown. */
  requeried?: { queries: number };
}

export const paymentWorkflowId = (paymentId: string) => `lightning-payment-${paymentId}`;

export const lightningPaymentFlow = defineFlow<LightningPaymentInput, InvoiceStatus>({
  workflowType: 'lightningPaymentWorkflow',
  workflowId: (input) => paymentWorkflowId(input.paymentId),
  resource: (input) => ({ type: 'lightning_payment', id: input.paymentId }),
  // Money flow: its activities are idempotent, so the reconciler may start a closed one again.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
