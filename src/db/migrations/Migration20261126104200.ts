import { Migration } from '@mikro-orm/migrations';

/**
 * Bounded growth (issue 32, item 8): a trigger arriving during a consolidation run is counted on the
 * run, with the last one kept, instead of appended to `recorded_triggers` (an array rewritten whole
 * on every trigger). Existing runs keep their count and their last trigger.
 */
export class Migration20261126104200 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "consolidation_runs" add column "recorded_trigger_count" int not null default 0, add column "last_recorded_trigger" jsonb null;`);
    this.addSql(
      `update "consolidation_runs" set "recorded_trigger_count" = jsonb_array_length("recorded_triggers"), "last_recorded_trigger" = "recorded_triggers" -> -1 ` +
        `where jsonb_typeof("recorded_triggers") = 'array' and jsonb_array_length("recorded_triggers") > 0;`,
    );
    this.addSql(`alter table "consolidation_runs" drop column "recorded_triggers";`);
  }

  override async down(): Promise<void> {
    // The triggers before the last one were never kept: the array holds the last one alone.
    this.addSql(`alter table "consolidation_runs" add column "recorded_triggers" jsonb null;`);
    this.addSql(`update "consolidation_runs" set "recorded_triggers" = jsonb_build_array("last_recorded_trigger") where "last_recorded_trigger" is not null;`);
    this.addSql(`alter table "consolidation_runs" drop column "recorded_trigger_count", drop column "last_recorded_trigger";`);
  }
}
