import { defineUpdate } from '@temporalio/workflow';
import type { ChainId } from '../../catalogue/service';
import { defineFlow } from '../../temporal/flow';

/**
 * A devnet chain's block producer: one long-lived workflow per chain, mining a block every interval
 * and as many as asked on demand. Shared by src/chains/devnet/producers.ts, which starts it at worker
 * start, the sandbox helper, which asks it for blocks, and workflows/produce-devnet-blocks.ts.
 * Workflow-safe: no Node APIs.
 */
export interface DevnetBlocksInput {
  chain: ChainId;
  /** Seconds between two blocks when nobody asks for one; each block answers the configured value anew. */
  intervalSeconds: number;
}

export const devnetBlocksWorkflowId = (chain: ChainId) => `devnet-blocks-${chain}`;

export const devnetBlocksFlow = defineFlow<DevnetBlocksInput, void>({
  workflowType: 'produceDevnetBlocksWorkflow',
  workflowId: (input) => devnetBlocksWorkflowId(input.chain),
  resource: (input) => ({ type: 'devnet_chain', id: input.chain }),
  // Runs for as long as the service does: a closed one (terminated by an operator) is started again at worker start.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});

/** The most blocks one request mines. */
export const MAX_BLOCKS_PER_REQUEST = 100;

export interface MineBlocksRequest {
  /** 1 to MAX_BLOCKS_PER_REQUEST. */
  count: number;
}

/** The newest block once the request's blocks are mined. */
export interface DevnetTip {
  height: number;
  hash: string;
}

/** Mines `count` blocks at once and answers the new tip. */
export const mineBlocksUpdate = defineUpdate<DevnetTip, [MineBlocksRequest]>('mineBlocks');

/** The ApplicationFailure type of a refused request (a count outside 1..MAX_BLOCKS_PER_REQUEST). */
export const INVALID_BLOCK_COUNT = 'InvalidBlockCount';
