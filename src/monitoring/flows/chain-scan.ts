import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { Environment } from '../../api-keys/entities';
import type { ChainId } from '../../catalogue/service';
import { defineFlow } from '../../temporal/flow';

/**
 * Block scanning of one chain in one environment: a workflow that runs as long as the service,
 * reading each new block once (the cursor in PostgreSQL says which was last), crediting incoming
 * transfers and confirming them at depth. Workflow-safe: no Node APIs.
 */
export interface ChainScanInput {
  chain: ChainId;
  environment: Environment;
  /** How long to wait for new blocks once caught up. */
  intervalSeconds: number;
}

export const chainScanWorkflowId = (chain: ChainId, environment: Environment) => `chain-scan-${chain}-${environment}`;

export const chainScanFlow = defineFlow<ChainScanInput, void>({
  workflowType: 'chainScanWorkflow',
  workflowId: (input) => chainScanWorkflowId(input.chain, input.environment),
  resource: (input) => ({ type: 'chain_scan', id: `${input.chain}-${input.environment}` }),
  // One scanner per chain and environment, started again at every worker start if it ever ended.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});

/** New blocks may be there (the devnet just mined): scan now rather than at the next interval. */
export const chainAdvancedSignal = defineSignal('chainAdvanced');

/** Scan now and answer once blocks up to `height` are processed, or after `waitSeconds` with how far it got. */
export const scanThroughUpdate = defineUpdate<{ height: number | null; reached: boolean }, [{ height: number; waitSeconds: number }]>('scanThrough');
