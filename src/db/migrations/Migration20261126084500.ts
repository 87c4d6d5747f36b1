import { Migration } from '@mikro-orm/migrations';

/**
 * Payout refunds followed to their end. A refund becomes a row of its own (status, current send,
 * attempts) that a deposit names instead of the send. Refunds already sent are carried over: a
 * failed send is refund_failed with its deposits held (the money is still in the desk); anything
 * else, settled included, is refund_pending: the reconciler starts its workflow, which records the
 * end on the trip's timeline.
 */
export class Migration20261126084500 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create type "payout_refund_reason" as enum ('underpayment', 'late_payment');`);
    this.addSql(`create type "payout_refund_status" as enum ('refund_pending', 'refunded', 'refund_failed');`);
    this.addSql(
      `create table "payout_refunds" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "trip_id" uuid not null, "reason" "payout_refund_reason" not null, "asset_id" text not null, "amount" numeric(78,0) not null, "status" "payout_refund_status" not null default 'refund_pending', "transaction_id" uuid not null, "attempts" int not null default 1, "failure_reason" text null, "created_at" timestamptz not null, "completed_at" timestamptz null, constraint "payout_refunds_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "payout_refunds_trip_id_index" on "payout_refunds" ("trip_id");`);
    this.addSql(`create index "payout_refunds_status_created_at_index" on "payout_refunds" ("status", "created_at");`);
    this.addSql(`alter table "payout_refunds" add constraint "payout_refunds_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "payout_refunds" add constraint "payout_refunds_trip_id_foreign" foreign key ("trip_id") references "payout_trips" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "payout_refunds" add constraint "payout_refunds_transaction_id_foreign" foreign key ("transaction_id") references "transactions" ("id") on update cascade on delete restrict;`);
    this.addSql(`alter table "payout_deposits" add column "refund_id" uuid null;`);
    this.addSql(`alter table "payout_deposits" add constraint "payout_deposits_refund_id_foreign" foreign key ("refund_id") references "payout_refunds" ("id") on update cascade on delete restrict;`);
    this.addSql(
      `insert into "payout_refunds" ("id", "organization_id", "environment", "trip_id", "reason", "asset_id", "amount", "status", "transaction_id", "attempts", "failure_reason", "created_at", "completed_at")
       select gen_random_uuid(), p.organization_id, p.environment, d.trip_id,
              case when bool_or(d.role = 'late') then 'late_payment'::payout_refund_reason else 'underpayment'::payout_refund_reason end,
              t.asset_id, t.amount,
              case when t.status = 'failed' then 'refund_failed'::payout_refund_status else 'refund_pending'::payout_refund_status end,
              t.id, 1, case when t.status = 'failed' then coalesce(t.failure_reason, 'failed') end, t.created_at,
              case when t.status = 'failed' then t.failed_at end
         from "payout_deposits" d join "transactions" t on t.id = d.refund_transaction_id join "payout_trips" p on p.id = d.trip_id
        group by p.id, d.trip_id, t.id;`,
    );
    this.addSql(`update "payout_deposits" d set "refund_id" = r.id from "payout_refunds" r where r.transaction_id = d.refund_transaction_id;`);
    this.addSql(`update "payout_deposits" d set "resolution" = 'hold' from "payout_refunds" r where r.id = d.refund_id and r.status = 'refund_failed';`);
    this.addSql(`alter table "payout_deposits" drop constraint "payout_deposits_refund_transaction_id_foreign";`);
    this.addSql(`alter table "payout_deposits" drop column "refund_transaction_id";`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "payout_deposits" add column "refund_transaction_id" uuid null;`);
    this.addSql(`update "payout_deposits" d set "refund_transaction_id" = r.transaction_id from "payout_refunds" r where r.id = d.refund_id;`);
    this.addSql(`alter table "payout_deposits" add constraint "payout_deposits_refund_transaction_id_foreign" foreign key ("refund_transaction_id") references "transactions" ("id") on update cascade on delete restrict;`);
    this.addSql(`alter table "payout_deposits" drop constraint "payout_deposits_refund_id_foreign";`);
    this.addSql(`alter table "payout_deposits" drop column "refund_id";`);
    this.addSql(`drop table if exists "payout_refunds" cascade;`);
    this.addSql(`drop type "payout_refund_status";`);
    this.addSql(`drop type "payout_refund_reason";`);
  }
}
