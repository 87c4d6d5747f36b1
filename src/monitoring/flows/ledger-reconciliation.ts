import type { Environment } from '../../api-keys/entities';
import type { ChainId } from '../../catalogue/service';

/**
 * The ledger reconciliation of one chain in one environment: a pass over every custody address (every
 * wallet on Bitcoin), a page at a time, comparing the ledger with the node at the scanner's block.
 * Started by the `ledger-reconciliation-<chain>-<environment>` Schedule. Workflow-safe: no Node APIs.
 */
export interface LedgerReconciliationInput {
  chain: ChainId;
  environment: Environment;
  /** Holders the pass's earlier runs compared, carried when it continues as new. */
  compared?: number;
  /** Tests scope a pass to their own organization. */
  organizationId?: string;
}

export const ledgerReconciliationWorkflowType = 'ledgerReconciliationWorkflow';
export const ledgerReconciliationScheduleId = (chain: ChainId, environment: Environment) => `ledger-reconciliation-${chain}-${environment}`;

/** How long a pass waits before it tries again a page that found the scanner behind, and how many times it does in one run. */
export const SCANNER_WAIT = '5 seconds';
export const SCANNER_WAITS_PER_PASS = 60;
