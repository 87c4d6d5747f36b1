import { Migration } from '@mikro-orm/migrations';

/**
 * Per-card daily totals of approved purchases (UTC days of created_at), kept by a trigger so that
 * every writer of card_transactions keeps them (the application, bulk inserts, a repair by hand):
 * the spend-limit windows sum whole days from here instead of every purchase of the year. Existing
 * purchases are summed in.
 */
export class Migration20261125214042 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "card_daily_purchases" ("card_id" uuid not null, "day" date not null, "amount" numeric(38,0) not null, constraint "card_daily_purchases_pkey" primary key ("card_id", "day"));`);
    this.addSql(`alter table "card_daily_purchases" add constraint "card_daily_purchases_card_id_foreign" foreign key ("card_id") references "cards" ("id") on update cascade on delete cascade;`);
    this.addSql(`
      create function card_daily_purchases_apply() returns trigger language plpgsql as $$
      begin
        if tg_op in ('UPDATE', 'DELETE') and old.type = 'purchase' and old.status = 'completed' then
          update card_daily_purchases set amount = amount - old.amount
           where card_id = old.card_id and day = (old.created_at at time zone 'UTC')::date;
        end if;
        if tg_op in ('INSERT', 'UPDATE') and new.type = 'purchase' and new.status = 'completed' then
          insert into card_daily_purchases (card_id, day, amount) values (new.card_id, (new.created_at at time zone 'UTC')::date, new.amount)
          on conflict (card_id, day) do update set amount = card_daily_purchases.amount + excluded.amount;
        end if;
        return null;
      end $$;`);
    this.addSql(`create trigger card_daily_purchases_apply after insert or update of type, status, amount, created_at, card_id or delete on card_transactions
      for each row execute function card_daily_purchases_apply();`);
    this.addSql(`insert into card_daily_purchases (card_id, day, amount)
      select card_id, (created_at at time zone 'UTC')::date, sum(amount) from card_transactions
       where type = 'purchase' and status = 'completed' group by 1, 2;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger if exists card_daily_purchases_apply on card_transactions;`);
    this.addSql(`drop function if exists card_daily_purchases_apply();`);
    this.addSql(`drop table if exists "card_daily_purchases" cascade;`);
  }
}
