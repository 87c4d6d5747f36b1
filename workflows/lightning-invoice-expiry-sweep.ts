import { proxyActivities } from '@temporalio/workflow';
import type { createLightningActivities } from '../activities/lightning';
import type { InvoiceExpirySweepInput, InvoiceExpirySweepResult } from '../src/lightning/flows/invoice-expiry-sweep';

const { expireDueLightningInvoices } = proxyActivities<ReturnType<typeof createLightningActivities>>({
  startToCloseTimeout: '2 minutes',
  // An invoice past its deadline must stop being payable: never given up. While a run waits out an outage the Schedule skips its ticks (overlap SKIP).
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/** Batches per run: bounds one run's history after a long outage; the next tick carries on. */
export const MAX_BATCHES_PER_RUN = 200;

/**
 * Started every few seconds by the `lightning-invoice-expiry` Schedule: expires, batch by batch,
 * every pending incoming invoice whose expires_at has passed. The cutoff is workflow time, which is
 * deterministic on replay and skips along with the time-skipping test server.
 */
export async function lightningInvoiceExpirySweepWorkflow(input: InvoiceExpirySweepInput): Promise<InvoiceExpirySweepResult> {
  const dueBy = new Date(Date.now()).toISOString();
  let expired = 0;
  for (let batches = 1; ; batches += 1) {
    const count = await expireDueLightningInvoices({ ...input, dueBy });
    expired += count;
    const complete = count < input.batchSize;
    if (complete || batches === MAX_BATCHES_PER_RUN) return { dueBy, expired, batches, complete };
  }
}
