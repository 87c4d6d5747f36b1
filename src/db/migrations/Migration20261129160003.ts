import { Migration } from '@mikro-orm/migrations';

/** What waits in the ledger's suspense is listed (`ledger:suspense`, /metrics) from its entries: an index of those alone. */
export class Migration20261129160003 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index "ledger_postings_suspense_entered_idx" on "ledger_postings" ("created_at") where kind = 'suspense_entered';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "ledger_postings_suspense_entered_idx";`);
  }
}
