/**
 * The ledger invariant check: every posting balanced, every balance row the sum of its accounts.
 * Started by the `ledger-invariant-check` Schedule. Workflow-safe: no Node APIs.
 */
export interface LedgerInvariantCheckInput {
  /** Tests scope a check to their own organization. */
  organizationId?: string;
}

export const ledgerInvariantCheckWorkflowType = 'ledgerInvariantCheckWorkflow';
export const LEDGER_INVARIANT_CHECK_SCHEDULE_ID = 'ledger-invariant-check';
