import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { createMonitoringActivities } from '../activities/monitoring';
import type { LedgerReconciliationInput } from '../src/monitoring/flows/ledger-reconciliation';
import { HISTORY_EVENTS_PER_RUN } from '../src/temporal/flow';

const { reconcileLedgerPage } = proxyActivities<ReturnType<typeof createMonitoringActivities>>({
  // A page reads up to 200 holders' balances of each asset from the node.
  startToCloseTimeout: '5 minutes',
  // A node or database outage is waited out; the Schedule skips its ticks meanwhile (overlap SKIP).
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One pass of the ledger reconciliation of a chain and environment: page after page until every
 * custody holder is compared with the node, or the scanner is found behind the tip (the next tick
 * tries again). A long pass continues as new with its cursor.
 */
export async function ledgerReconciliationWorkflow(input: LedgerReconciliationInput): Promise<{ compared: number; skipped?: string }> {
  let cursor = input.cursor ?? null;
  let compared = 0;
  for (;;) {
    if (workflowInfo().historyLength > HISTORY_EVENTS_PER_RUN) return continueAsNew<typeof ledgerReconciliationWorkflow>({ ...input, cursor });
    const page = await reconcileLedgerPage({ chain: input.chain, environment: input.environment, cursor, ...(input.organizationId ? { organizationId: input.organizationId } : {}) });
    compared += page.compared;
    if (page.skipped) return { compared, skipped: page.skipped };
    if (!page.next) return { compared };
    cursor = page.next;
  }
}
