import { continueAsNew, patched, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { createMonitoringActivities } from '../activities/monitoring';
import { SCANNER_WAITS_PER_PASS, SCANNER_WAIT, type LedgerReconciliationInput } from '../src/monitoring/flows/ledger-reconciliation';
import { HISTORY_EVENTS_PER_RUN } from '../src/temporal/flow';

const { reconcileLedgerPage } = proxyActivities<ReturnType<typeof createMonitoringActivities>>({
  // A page reads its holders' balances of each asset from the node, batched.
  startToCloseTimeout: '5 minutes',
  // A node or database outage is waited out; the Schedule skips its ticks meanwhile (overlap SKIP).
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Histories recorded before it ended a pass at the first page that found the scanner behind. */
const WAITS_FOR_SCANNER_PATCH = 'ledger-reconciliation-waits-for-scanner';

/**
 * One pass of the ledger reconciliation of a chain and environment: page after page until every
 * custody holder is compared with the node. The pass's cursor is stored with each page, so a page that
 * finds the scanner behind (a node read at its tip, or a scanner 30 s behind the slot a Solana node
 * read at) is tried again after a wait, and after
 * SCANNER_WAITS_PER_PASS of them the pass ends; the next resumes at the same page. A long pass
 * continues as new.
 */
export async function ledgerReconciliationWorkflow(input: LedgerReconciliationInput): Promise<{ compared: number; skipped?: string }> {
  const waits = patched(WAITS_FOR_SCANNER_PATCH);
  let compared = input.compared ?? 0;
  let waited = 0;
  for (;;) {
    if (workflowInfo().historyLength > HISTORY_EVENTS_PER_RUN) return continueAsNew<typeof ledgerReconciliationWorkflow>({ ...input, compared });
    const page = await reconcileLedgerPage({ chain: input.chain, environment: input.environment, ...(input.organizationId ? { organizationId: input.organizationId } : {}) });
    compared += page.compared;
    if (page.skipped) {
      if (!waits || ++waited > SCANNER_WAITS_PER_PASS) return { compared, skipped: page.skipped };
      await sleep(SCANNER_WAIT);
      continue;
    }
    if (!page.next) return { compared };
  }
}
