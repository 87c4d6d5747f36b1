/**
 * The expiry sweep of incoming invoices, run by the `lightning-invoice-expiry` Schedule
 * (src/temporal/setup.ts) instead of one workflow per invoice. Shared by the Schedule's definition,
 * workflows/lightning-invoice-expiry-sweep.ts and activities/lightning.ts. Workflow-safe: no Node APIs.
 */
export const LIGHTNING_INVOICE_EXPIRY_SCHEDULE_ID = 'lightning-invoice-expiry';
export const invoiceExpirySweepWorkflowType = 'lightningInvoiceExpirySweepWorkflow';

export interface InvoiceExpirySweepInput {
  /** Invoices expired per transaction. */
  batchSize: number;
  /** Tests scope a sweep to their own organization. */
  organizationId?: string;
}

/** One batch: pending incoming invoices whose expires_at is at or before `dueBy` (RFC 3339). */
export interface InvoiceExpiryBatch extends InvoiceExpirySweepInput {
  dueBy: string;
}

export interface InvoiceExpirySweepResult {
  /** The run's cutoff: every invoice pending and due by then was expired, unless `complete` is false. */
  dueBy: string;
  expired: number;
  batches: number;
  /** False when the run stopped at its batch limit; the next tick carries on. */
  complete: boolean;
}
