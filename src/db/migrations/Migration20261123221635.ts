import { Migration } from '@mikro-orm/migrations';

export class Migration20261123221635 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "payout_payment_method" as enum ('bank', 'mobile_money');`);
    this.addSql(`create type "sandbox_rail_outcome" as enum ('success', 'failed', 'blocked', 'unknown');`);
    this.addSql(`create type "payout_trip_status" as enum ('awaiting_deposit', 'funded', 'processing', 'success', 'failed', 'expired', 'held');`);
    this.addSql(`create type "payout_deposit_role" as enum ('funding', 'late');`);
    this.addSql(`create type "payout_deposit_resolution" as enum ('refund', 'credit', 'hold');`);
    this.addSql(`create table "payout_quotes" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "asset_id" text not null, "chain" text not null, "to_currency" text not null, "country" text not null, "payment_method" "payout_payment_method" not null, "amount_currency" text not null, "rate" text not null, "from_amount" numeric(78,0) not null, "to_amount" numeric(38,0) not null, "fees" jsonb not null, "limits" jsonb not null, "expires_at" timestamptz not null, "created_at" timestamptz not null, constraint "payout_quotes_pkey" primary key ("id"));`);

    this.addSql(`create table "sandbox_rail_instructions" ("trip_id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "outcome" "sandbox_rail_outcome" not null default 'success', "failure_reason" text null, "submissions" int not null default 0, "amount" numeric(38,0) null, "currency" text null, "paid_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "sandbox_rail_instructions_pkey" primary key ("trip_id"));`);

    this.addSql(`create table "payout_trips" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "quote_id" uuid not null, "reference" text not null, "request_hash" text not null, "beneficiary" jsonb not null, "refund_address" text null, "chain" text not null, "asset_id" text not null, "deposit_address_record_id" uuid not null, "deposit_address" text not null, "status" "payout_trip_status" not null default 'awaiting_deposit', "expires_at" timestamptz not null, "amount_received" numeric(78,0) null, "asset_received_at" timestamptz null, "asset_confirmed_at" timestamptz null, "payout_amount" numeric(38,0) null, "credited_amount" numeric(78,0) null, "failure_reason" text null, "hold_reason" text null, "rail" text null, "completed_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "payout_trips_pkey" primary key ("id"));`);
    this.addSql(`create index "payout_trips_deposit_address_index" on "payout_trips" ("deposit_address");`);
    this.addSql(`create index "payout_trips_organization_id_environment_created_at_id_index" on "payout_trips" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "payout_trips" add constraint "payout_trips_quote_id_unique" unique ("quote_id");`);
    this.addSql(`alter table "payout_trips" add constraint "payout_trips_organization_id_environment_reference_unique" unique ("organization_id", "environment", "reference");`);

    this.addSql(`create table "payout_trip_transitions" ("id" uuid not null, "trip_id" uuid not null, "name" text not null, "key" text not null, "details" jsonb not null, "occurred_at" timestamptz not null, constraint "payout_trip_transitions_pkey" primary key ("id"));`);
    this.addSql(`create index "payout_trip_transitions_trip_id_occurred_at_index" on "payout_trip_transitions" ("trip_id", "occurred_at");`);
    this.addSql(`alter table "payout_trip_transitions" add constraint "payout_trip_transitions_trip_id_key_unique" unique ("trip_id", "key");`);

    this.addSql(`create table "payout_deposits" ("id" uuid not null, "trip_id" uuid not null, "incoming_transfer_id" uuid not null, "txid" text not null, "amount" numeric(78,0) not null, "role" "payout_deposit_role" not null, "seen_at" timestamptz not null, "confirmed_at" timestamptz null, "dropped_at" timestamptz null, "resolution" "payout_deposit_resolution" null, "refund_transaction_id" uuid null, "resolved_at" timestamptz null, constraint "payout_deposits_pkey" primary key ("id"));`);
    this.addSql(`create index "payout_deposits_trip_id_index" on "payout_deposits" ("trip_id");`);
    this.addSql(`alter table "payout_deposits" add constraint "payout_deposits_incoming_transfer_id_unique" unique ("incoming_transfer_id");`);

    this.addSql(`alter table "payout_quotes" add constraint "payout_quotes_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "sandbox_rail_instructions" add constraint "sandbox_rail_instructions_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "payout_trips" add constraint "payout_trips_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "payout_trips" add constraint "payout_trips_quote_id_foreign" foreign key ("quote_id") references "payout_quotes" ("id") on update cascade on delete restrict;`);
    this.addSql(`alter table "payout_trips" add constraint "payout_trips_deposit_address_record_id_foreign" foreign key ("deposit_address_record_id") references "addresses" ("id") on update cascade on delete restrict;`);

    this.addSql(`alter table "payout_trip_transitions" add constraint "payout_trip_transitions_trip_id_foreign" foreign key ("trip_id") references "payout_trips" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "payout_deposits" add constraint "payout_deposits_trip_id_foreign" foreign key ("trip_id") references "payout_trips" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "payout_deposits" add constraint "payout_deposits_refund_transaction_id_foreign" foreign key ("refund_transaction_id") references "transactions" ("id") on update cascade on delete restrict;`);

    this.addSql(`alter type "balance_currency" add value if not exists 'usdt' after 'sat';`);

    this.addSql(`alter type "balance_currency" add value if not exists 'usdc' after 'usdt';`);

  }

  override async down(): Promise<void> {
    this.addSql(`alter table "payout_trips" drop constraint "payout_trips_quote_id_foreign";`);

    this.addSql(`alter table "payout_trip_transitions" drop constraint "payout_trip_transitions_trip_id_foreign";`);

    this.addSql(`alter table "payout_deposits" drop constraint "payout_deposits_trip_id_foreign";`);

    this.addSql(`drop table if exists "payout_quotes" cascade;`);

    this.addSql(`drop table if exists "sandbox_rail_instructions" cascade;`);

    this.addSql(`drop table if exists "payout_trips" cascade;`);

    this.addSql(`drop table if exists "payout_trip_transitions" cascade;`);

    this.addSql(`drop table if exists "payout_deposits" cascade;`);

    this.addSql(`drop type "payout_payment_method";`);
    this.addSql(`drop type "sandbox_rail_outcome";`);
    this.addSql(`drop type "payout_trip_status";`);
    this.addSql(`drop type "payout_deposit_role";`);
    this.addSql(`drop type "payout_deposit_resolution";`);
  }

}
