import { proxyActivities } from '@temporalio/workflow';
import type { createMonitoringActivities } from '../activities/monitoring';
import type { LedgerInvariantCheckInput } from '../src/monitoring/flows/ledger-invariant-check';

const { checkLedgerInvariants } = proxyActivities<ReturnType<typeof createMonitoringActivities>>({
  // Sums every line of the ledger in one snapshot.
  startToCloseTimeout: '30 minutes',
  // A database outage is waited out; the Schedule skips its ticks meanwhile (overlap SKIP).
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Started by the `ledger-invariant-check` Schedule: proves the ledger whole, or raises ledger.invariant_broken. */
export async function ledgerInvariantCheckWorkflow(input: LedgerInvariantCheckInput): Promise<{ violations: number }> {
  return checkLedgerInvariants(input);
}
