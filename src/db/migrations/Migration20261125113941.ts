import { Migration } from '@mikro-orm/migrations';

/**
 * Spend limits without summing a card's history (src/cards/spend-limits.ts): the all-time window is
 * a running total on the card, started here from the approved purchases so far; the other windows
 * are one range of a partial index of approved purchases by card and time, amounts included so the
 * sums are read from the index alone.
 */
export class Migration20261125113941 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "cards" add column "spent_all_time" numeric(38,0) not null default '0';`);
    this.addSql(`update "cards" set "spent_all_time" = purchases.total
      from (select card_id, sum(amount) as total from card_transactions where type = 'purchase' and status = 'completed' group by card_id) as purchases
      where purchases.card_id = "cards"."id";`);
    this.addSql(`create index "card_transactions_completed_purchases_index" on "card_transactions" ("card_id", "created_at") include ("amount") where type = 'purchase' and status = 'completed';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "card_transactions_completed_purchases_index";`);
    this.addSql(`alter table "cards" drop column "spent_all_time";`);
  }
}
