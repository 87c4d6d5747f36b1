import { defineSignal } from '@temporalio/workflow';
import { defineFlow } from '../../temporal/flow';
import type { InvoiceStatus } from '../entities';

/**
 * An incoming invoice's flow: waits for its payment or its expiry. Only invoices created before the
 * expiry sweep (flows/invoice-expiry-sweep.ts) have one: nothing records its start any more, and it
 * stays defined so those still running drain (and the start sweep can fire one still recorded).
 * Workflow-safe: no Node APIs.
 */
export interface LightningInvoiceInput {
  invoiceId: string;
  /** RFC 3339: the expiry timer fires exactly then. */
  expiresAt: string;
}

export const invoiceWorkflowId = (invoiceId: string) => `lightning-invoice-${invoiceId}`;

export const lightningInvoiceFlow = defineFlow<LightningInvoiceInput, InvoiceStatus>({
  workflowType: 'lightningInvoiceWorkflow',
  workflowId: (input) => invoiceWorkflowId(input.invoiceId),
  resource: (input) => ({ type: 'lightning_invoice', id: input.invoiceId }),
  // It settles money (expiry races payment): the reconciler may start a closed one again; it re-reads the status.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});

/** Handled by the workflow (and its recorded history), no longer sent: a paid invoice's workflow ends at its timer. */
export const invoicePaidSignal = defineSignal('invoicePaid');
