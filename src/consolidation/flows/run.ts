import { defineFlow } from '../../temporal/flow';
import type { RunStatus } from '../entities';

/**
 * A consolidation run's flow: scan the vault's addresses in pages, plan and submit the sweeps
 * through the sending machinery, follow them to their confirmations, finish the run. Shared by
 * the run service, which records its start, and workflows/consolidation-run.ts. Workflow-safe.
 */
export interface RunInput {
  runId: string;
  /** Set when a run continues as new: the last address scanned (scanning), or that scanning is done (following). */
  resume?: { phase: 'scanning'; cursor: string } | { phase: 'following' };
}

export const consolidationRunFlow = defineFlow<RunInput, RunStatus>({
  workflowType: 'consolidationRunWorkflow',
  workflowId: (input) => `consolidation-run-${input.runId}`,
  resource: (input) => ({ type: 'consolidation_run', id: input.runId }),
  // Money flow: its activities are idempotent, so the reconciler may start a closed one again.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
