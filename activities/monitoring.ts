import { Context } from '@temporalio/activity';
import type { ChainNodes } from '../src/chains/nodes';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import type { Logger } from '../src/logger';
import { ledgerProjections } from '../src/registries';
import { checkLedgerInvariants } from '../src/monitoring/ledger-invariants';
import { reconcileLedgerPage, type ReconciliationPage, type ReconciliationPageInput } from '../src/monitoring/reconciliation';
import { scanChain, type ScanResult } from '../src/monitoring/scanner';
import { requiredConfirmations, type ChainEnvironment } from '../src/monitoring/service';
import { transactionWithStarts } from './with-starts';

export interface MonitoringActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  chains: ChainNodes;
}

export const createMonitoringActivities = (deps: MonitoringActivityDeps) => ({
  /** One pass of block scanning (src/monitoring/scanner.ts); deliveries of the events it emits start as each block commits. */
  async scanChain(input: ChainEnvironment & { maxBlocks: number }): Promise<ScanResult> {
    const context = Context.current();
    return scanChain(
      { chains: deps.chains, config: deps.config, log: deps.log, em: () => deps.orm.em.fork(), transaction: transactionWithStarts(deps), blockDone: () => context.heartbeat() },
      input,
    );
  },

  /** One page of the ledger reconciliation (src/monitoring/reconciliation.ts); the ledger.drift events it emits are delivered once it commits. */
  async reconcileLedgerPage(input: ReconciliationPageInput): Promise<ReconciliationPage> {
    return reconcileLedgerPage(
      {
        chains: deps.chains,
        log: deps.log,
        em: () => deps.orm.em.fork(),
        transaction: transactionWithStarts(deps),
        holdersPerPage: deps.config.LEDGER_RECONCILIATION_HOLDERS_PER_PAGE,
        confirmations: requiredConfirmations(deps.config, input.chain),
      },
      input,
    );
  },

  /** The ledger's invariants over every organization (src/monitoring/ledger-invariants.ts); ledger.invariant_broken is delivered once it commits. */
  async checkLedgerInvariants(input: { organizationId?: string }): Promise<{ violations: number }> {
    return checkLedgerInvariants({ log: deps.log, em: () => deps.orm.em.fork(), transaction: transactionWithStarts(deps), projections: ledgerProjections }, input);
  },
});
