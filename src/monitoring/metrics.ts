import { Gauge, type Registry } from 'prom-client';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ChainScanCursor } from './entities';

/**
 * Chain scanning's health in /metrics, read from the scan cursors at each scrape: the scanner runs
 * in the worker, the metrics are served by the API. A resync (no common block with the node within
 * the lookback) is what an operator is alerted to: transfers older than its checkpoint are not
 * checked again. So is a send mined after it had failed (src/transactions/mined-after-failure.ts).
 */
export function registerScanMetrics(registry: Registry, em: () => EntityManager): void {
  new Gauge({
    name: 'chain_scan_resyncs',
    help: 'Times scanning of the chain found no common block with its node among the blocks it keeps and resynchronised from a checkpoint',
    labelNames: ['chain', 'environment'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const cursor of await em().find(ChainScanCursor, {})) this.set({ chain: cursor.chain, environment: cursor.environment }, cursor.resyncs);
    },
  });
  new Gauge({
    name: 'chain_scan_last_resync_timestamp_seconds',
    help: 'When scanning of the chain last resynchronised from a checkpoint (absent: never)',
    labelNames: ['chain', 'environment'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const cursor of await em().find(ChainScanCursor, { lastResyncAt: { $ne: null } })) {
        this.set({ chain: cursor.chain, environment: cursor.environment }, cursor.lastResyncAt!.getTime() / 1000);
      }
    },
  });
  new Gauge({
    name: 'transactions_mined_after_failure',
    help: 'Sends mined after they had failed and their lock was released (debited when seen; each raised transaction.mined_after_failure): any is an alarm',
    labelNames: ['chain', 'environment'],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await em()
        .getConnection()
        .execute<{ chain: string; environment: string; count: string }[]>(
          `select chain, environment, count(*)::text as count from transactions where mined_after_failure_at is not null group by chain, environment`,
        );
      for (const row of rows) this.set({ chain: row.chain, environment: row.environment }, Number(row.count));
    },
  });
}

/**
 * The ledger reconciliation in /metrics, read from PostgreSQL at each scrape (the worker reconciles,
 * the API serves the metrics): the drifts not resolved, by chain, environment, asset and status; per
 * chain and environment the last complete pass (when it ended, how long it took, how many holders it
 * compared). A pass that stops completing shows as a timestamp that no longer moves.
 */
export function registerReconciliationMetrics(registry: Registry, em: () => EntityManager): void {
  new Gauge({
    name: 'custody_ledger_drifts',
    help: 'Custody ledger figures that differ from what they are compared with (status open: waiting for an operator; suspected: seen once by a pass before issue 48)',
    labelNames: ['chain', 'environment', 'asset', 'status'],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await em().execute<{ chain: string; environment: string; asset_id: string; status: string; count: string }[]>(
        `select chain, environment, asset_id, status, count(*) as count from ledger_drifts where status in ('suspected', 'open') group by 1, 2, 3, 4`,
      );
      for (const row of rows) this.set({ chain: row.chain, environment: row.environment, asset: row.asset_id, status: row.status }, Number(row.count));
    },
  });
  const lastPasses = () =>
    em().execute<{ chain: string; environment: string; started: string; completed: string; holders: number }[]>(
      `select distinct on (chain, environment) chain, environment, extract(epoch from last_started_at)::float8 as started, extract(epoch from last_completed_at)::float8 as completed,
              last_holders_compared as holders
         from ledger_reconciliation_passes where last_completed_at is not null order by chain, environment, last_completed_at desc`,
    );
  const passGauge = (name: string, help: string, value: (pass: Awaited<ReturnType<typeof lastPasses>>[number]) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['chain', 'environment'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const pass of await lastPasses()) this.set({ chain: pass.chain, environment: pass.environment }, value(pass));
      },
    });
  passGauge('custody_reconciliation_last_complete_pass_timestamp_seconds', 'When the last complete ledger reconciliation pass of the chain ended', (pass) => Number(pass.completed));
  passGauge('custody_reconciliation_pass_duration_seconds', 'How long the last complete ledger reconciliation pass of the chain took', (pass) => Number(pass.completed) - Number(pass.started));
  passGauge('custody_reconciliation_holders_compared', 'Custody holders (addresses; wallets on Bitcoin) the last complete ledger reconciliation pass compared', (pass) => pass.holders);
}
