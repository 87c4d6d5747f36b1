import type { Environment } from '../../api-keys/entities';
import type { ChainId } from '../../catalogue/service';

/**
 * The ledger reconciliation of one chain in one environment: a pass over every custody address (every
 * wallet on Bitcoin), a page at a time, comparing the journal's balances with the node. Started by
 * the `ledger-reconciliation-<chain>-<environment>` Schedule. Workflow-safe: no Node APIs.
 */
export interface LedgerReconciliationInput {
  chain: ChainId;
  environment: Environment;
  /** Set when a pass continues as new: the last holder compared. */
  cursor?: string | null;
  /** Tests scope a pass to their own organization. */
  organizationId?: string;
}

export const ledgerReconciliationWorkflowType = 'ledgerReconciliationWorkflow';
export const ledgerReconciliationScheduleId = (chain: ChainId, environment: Environment) => `ledger-reconciliation-${chain}-${environment}`;
