import { defineSignal } from '@temporalio/workflow';
import { defineFlow } from '../../temporal/flow';
import type { InvoiceStatus } from '../entities';

/**
 * An incoming invoice's flow: waits for its payment or its expiry. Shared by the Lightning service,
 * which records its start, and workflows/lightning-invoice.ts. Workflow-safe: no Node APIs.
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

/** Whoever settled the invoice tells its workflow, so it ends before its expiry timer (it re-reads the status). */
export const invoicePaidSignal = defineSignal('invoicePaid');
