import type { Config } from '../../config';
import type { WorkflowStarter } from '../../temporal/starter';
import { devnetBlocksFlow } from '../flows/devnet-blocks';
import { sandboxDevnetChains } from '../nodes';

/**
 * At worker start: the block producer of every chain whose sandbox provider is the devnet, unless
 * it already runs. A chain given a sandbox node later keeps its devnet producer until it is terminated.
 */
export async function ensureDevnetWorkflows(starter: WorkflowStarter, config: Config): Promise<void> {
  for (const chain of sandboxDevnetChains(config)) {
    await starter.ensureRunning(devnetBlocksFlow, { chain, intervalSeconds: config.DEVNET_BLOCK_INTERVAL_SECONDS });
  }
}
