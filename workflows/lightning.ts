import { condition, defineSignal, proxyActivities, setHandler, sleep } from '@temporalio/workflow';
import type { createLightningActivities, SerializedOutcome } from '../activities/lightning';

const activities = proxyActivities<ReturnType<typeof createLightningActivities>>({
  // A slow remote node may take a few seconds; the rest are small transactions.
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 20 },
});

export const invoicePaidSignal = defineSignal('invoicePaid');

/**
 * One incoming invoice: waits for its payment (a signal from whoever settled it; the status is
 * re-read, so a stray signal changes nothing) or for its expiry, exactly at expires_at.
 */
export async function lightningInvoiceWorkflow(input: { invoiceId: string; expiresAt: string }): Promise<string> {
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
}

/** Re-query waits while the outcome is unknown: 10 s doubling to 10 min, then every 10 min. */
const QUERY_INITIAL_MS = 10_000;
const QUERY_MAX_MS = 10 * 60_000;

/**
 * One outgoing payment (amount plus fee limit already reserved by the API): send it, and while
 * the outcome is unknown keep re-querying on a durable timer, never refunding blind (rule 6);
 * then capture (paid) or release (failed) exactly once.
 */
export async function lightningPaymentWorkflow(input: { paymentId: string }): Promise<string> {
  let outcome: SerializedOutcome = await activities.sendLightningPayment({ paymentId: input.paymentId });
  for (let queryNumber = 1, wait = QUERY_INITIAL_MS; outcome.state === 'unknown'; queryNumber += 1, wait = Math.min(wait * 2, QUERY_MAX_MS)) {
    await sleep(wait);
    outcome = await activities.queryLightningPayment({ paymentId: input.paymentId, queryNumber });
  }
  return activities.finalizeLightningPayment({ paymentId: input.paymentId, outcome });
}
