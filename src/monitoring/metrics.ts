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
