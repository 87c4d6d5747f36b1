import { Migration } from '@mikro-orm/migrations';

/**
 * Reorganisations at any depth. A deposit or a settled send counts the times a reorganisation took
 * its block away: each later sighting posts journal entries and events of its own. A chain's scan
 * cursor counts its resynchronisations (no common block with the node within the lookback), which
 * /metrics exports. The settled sends that lost their block, asked about at every scan pass, have an
 * index of their own.
 */
export class Migration20261126083000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "incoming_transfers" add column "reorganisations" int not null default 0;`);
    // Rounds already journaled (a deposit_dropped entry per round), and at least one for a transfer dropped now.
    this.addSql(`update "incoming_transfers" t set "reorganisations" = greatest(
       (select count(*) from "custody_journal_entries" e
         where e."reference_type" = 'incoming_transfer' and e."kind" in ('deposit_dropped', 'deposit_reversed') and e."reference_id" like t."id"::text || '#%'),
       case when t."status" = 'dropped' then 1 else 0 end);`);
    this.addSql(`alter table "transactions" add column "reorganisations" int not null default 0;`);
    this.addSql(
      `create index "transactions_unplaced_settled_index" on "transactions" ("chain", "environment") where block_hash is null and (status = 'confirmed' or (status = 'failed' and failure_reason = 'reverted'));`,
    );
    this.addSql(`alter table "chain_scan_cursors" add column "resyncs" int not null default 0, add column "last_resync_at" timestamptz null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "chain_scan_cursors" drop column "resyncs", drop column "last_resync_at";`);
    this.addSql(`drop index "transactions_unplaced_settled_index";`);
    this.addSql(`alter table "transactions" drop column "reorganisations";`);
    this.addSql(`alter table "incoming_transfers" drop column "reorganisations";`);
  }
}
