import { Migration } from '@mikro-orm/migrations';

/**
 * Surplus credited on proof (issue 48, part 5): a drift remembers where it first saw the chain hold
 * more, and the smallest surplus since, so that only a final surplus is credited; and what it credited.
 */
export class Migration20261129160001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "ledger_drifts" add column "surplus_seen_height" bigint null, add column "surplus_seen_hash" text null, add column "surplus_floor" numeric(78,0) null, add column "credited_amount" numeric(78,0) null;`,
    );
    // Credited before this migration: at once, the whole difference.
    this.addSql(`update "ledger_drifts" set "credited_amount" = "chain_amount" - "ledger_amount" where "status" = 'credited';`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "ledger_drifts" drop column "surplus_seen_height", drop column "surplus_seen_hash", drop column "surplus_floor", drop column "credited_amount";`);
  }
}
