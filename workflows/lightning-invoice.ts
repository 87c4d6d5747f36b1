import { condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { createLightningActivities } from '../activities/lightning';
import { invoicePaidSignal, type lightningInvoiceFlow } from '../src/lightning/flows/invoice';
import type { WorkflowOf } from '../src/temporal/flow';

const activities = proxyActivities<ReturnType<typeof createLightningActivities>>({
  // Small transactions.
  startToCloseTimeout: '1 minute',
  // Settling never gives up: an outage (database) is retried for as long as it lasts, at most 5 min apart.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/**
 * One incoming invoice: waits for its payment (a signal from whoever settled it; the status is
 * re-read, so a stray signal changes nothing) or for its expiry, exactly at expires_at.
 */
export const lightningInvoiceWorkflow: WorkflowOf<typeof lightningInvoiceFlow> = async (input) => {
  let signalled = false;
  setHandler(invoicePaidSignal, () => {
    signalled = true;
  });
  const expiresAt = new Date(input.expiresAt).getTime();
  for (;;) {
    const remaining = expiresAt - Date.now();
    if (remaining <= 0 || !(await condition(() => signalled, remaining))) {
      return activities.expireLightningInvoice({ invoiceId: input.invoiceId, at: new Date(expiresAt).toISOString() });
    }
    signalled = false;
    const status = await activities.readLightningInvoiceStatus({ invoiceId: input.invoiceId });
    if (status !== 'pending') return status;
  }
};
