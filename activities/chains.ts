import type { EntityManager } from '@mikro-orm/postgresql';
import type { ChainId } from '../src/catalogue/service';
import { mineDevnetBlocks } from '../src/chains/devnet/block-production';
import type { DevnetTip } from '../src/chains/flows/devnet-blocks';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';

export interface ChainActivityDeps {
  config: Config;
  orm: Orm;
}

export const createChainActivities = (deps: ChainActivityDeps) => ({
  /**
   * Mines one step of a devnet block producer. A step already carried out (`producedBy` found on
   * its blocks) mines nothing more and answers the tip it produced. Answers the configured block
   * interval too, so a changed DEVNET_BLOCK_INTERVAL_SECONDS applies from the next wait.
   */
  async mineDevnetBlocks(input: { chain: ChainId; count: number; producedBy: string }): Promise<{ tip: DevnetTip; blockIntervalSeconds: number }> {
    const tip = await mineDevnetBlocks(deps.orm.em.fork() as EntityManager, input.chain, input.count, input.producedBy);
    return { tip, blockIntervalSeconds: deps.config.DEVNET_BLOCK_INTERVAL_SECONDS };
  },
});
