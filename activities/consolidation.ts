import { Context } from '@temporalio/activity';
import type { ChainNodes } from '../src/chains/nodes';
import type { Config } from '../src/config';
import { finishRun, finishScanning, followSweeps, planPage, startScanning, submitSweeps, type SweepingDeps } from '../src/consolidation/sweeping';
import type { Orm } from '../src/db/orm';
import type { Logger } from '../src/logger';
import { sponsorSendFee } from '../src/gas-stations/sponsorship';
import { transactionWithStarts } from './with-starts';

export interface ConsolidationActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  chains: ChainNodes;
}

/** The steps of a consolidation run (src/consolidation/sweeping.ts); each is idempotent. */
export const createConsolidationActivities = (deps: ConsolidationActivityDeps) => {
  const sweeping: SweepingDeps = { config: deps.config, chains: deps.chains, em: () => deps.orm.em.fork(), transaction: transactionWithStarts(deps), feeSponsor: sponsorSendFee };
  // The steps that read the node or send heartbeat as they go (SweepingDeps.progress).
  const heartbeating = (): SweepingDeps => {
    const context = Context.current();
    return { ...sweeping, progress: () => context.heartbeat() };
  };
  return {
    startConsolidationRun: (input: { runId: string }) => startScanning(sweeping, input.runId),
    planConsolidationPage: (input: { runId: string; cursor: string | null }) => planPage(heartbeating(), input.runId, input.cursor),
    finishConsolidationScan: (input: { runId: string }) => finishScanning(sweeping, input.runId),
    submitConsolidationSweeps: (input: { runId: string }) => submitSweeps(heartbeating(), input.runId),
    followConsolidationSweeps: (input: { runId: string }) => followSweeps(sweeping, input.runId),
    finishConsolidationRun: (input: { runId: string }) => finishRun(sweeping, input.runId),
  };
};
