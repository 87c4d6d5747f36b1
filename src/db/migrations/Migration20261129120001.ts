import { Migration } from '@mikro-orm/migrations';

/**
 * Ledger drifts name their figure (issue 48, part 4): the balance (compared with the chain at a pinned
 * block), the locked amount (with what the sends in flight lock) or the pending amount (with the
 * deposits the scanner has not confirmed). Every drift found before was of the balance.
 */
export class Migration20261129120001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create type "ledger_drift_figure" as enum ('balance', 'locked', 'pending');`);
    this.addSql(`alter table "ledger_drifts" add column "figure" "ledger_drift_figure" not null default 'balance';`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "ledger_drifts" drop column "figure";`);
    this.addSql(`drop type "ledger_drift_figure";`);
  }
}
