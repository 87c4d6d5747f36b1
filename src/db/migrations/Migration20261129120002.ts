import { Migration } from '@mikro-orm/migrations';

/**
 * Ledger reconciliation passes (issue 48, part 4): the cursor of the pass under way per chain,
 * environment and scope, so that a pass resumes where it stopped, and the last complete pass (when it
 * started and ended, how many holders it compared) that /metrics reports.
 */
export class Migration20261129120002 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "ledger_reconciliation_passes" ("chain" text not null, "environment" "environment" not null, "scope" text not null, "cursor" text null, "started_at" timestamptz not null, "holders_compared" integer not null default 0, "last_started_at" timestamptz null, "last_completed_at" timestamptz null, "last_holders_compared" integer null, constraint "ledger_reconciliation_passes_pkey" primary key ("chain", "environment", "scope"));`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "ledger_reconciliation_passes" cascade;`);
  }
}
