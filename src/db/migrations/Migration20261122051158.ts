import { Migration } from '@mikro-orm/migrations';

export class Migration20261122051158 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "card_type" as enum ('virtual', 'physical');`);
    this.addSql(`create type "card_status" as enum ('pending', 'active', 'frozen', 'terminated', 'failed');`);
    this.addSql(`create type "card_created_status" as enum ('processing', 'completed', 'failed');`);
    this.addSql(`create type "card_transaction_type" as enum ('funding', 'withdrawal', 'purchase');`);
    this.addSql(`create type "card_transaction_status" as enum ('pending', 'completed', 'failed', 'declined');`);
    this.addSql(`create table "card_customers" ("id" uuid not null, "organization_id" uuid not null, "customer_type" text not null, "first_name" text not null, "last_name" text not null, "email" text not null, "phone_number" text not null, "dial_code" text not null, "date_of_birth" text not null, "id_type" text not null, "id_number" text not null, "address" jsonb not null, "country" text not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "card_customers_pkey" primary key ("id"));`);
    this.addSql(`create index "card_customers_organization_id_created_at_id_index" on "card_customers" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "card_customers" add constraint "card_customers_organization_id_id_type_id_number_country_unique" unique ("organization_id", "id_type", "id_number", "country");`);

    this.addSql(`create table "cards" ("id" uuid not null, "organization_id" uuid not null, "customer_id" uuid not null, "environment" "environment" not null, "card_type" "card_type" not null, "status" "card_status" not null default 'pending', "created_status" "card_created_status" not null default 'processing', "name" text not null, "preferred_name" text not null, "currency" text not null, "card_brand" text not null, "masked_pan" text not null default '', "last_four" text null, "secrets" jsonb null, "balance" numeric(38,0) not null default '0', "held" numeric(38,0) not null default '0', "initial_amount" numeric(38,0) not null, "contactless_payment" boolean not null, "spending_limits" jsonb not null, "reference" text not null, "webhook_url" text null, "webhook_secret_current" text not null, "webhook_secret_previous" text null, "webhook_secret_previous_expires_at" timestamptz null, "api_version" text not null, "user_metadata" text not null, "billing_address" jsonb not null, "created_by" uuid null, "failure_reason" text null, "terminated_at" timestamptz null, "termination_reason" text null, "remaining_balance" numeric(38,0) null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "cards_pkey" primary key ("id"));`);
    this.addSql(`create index "cards_customer_id_created_at_id_index" on "cards" ("customer_id", "created_at", "id");`);
    this.addSql(`create index "cards_organization_id_created_at_id_index" on "cards" ("organization_id", "created_at", "id");`);

    this.addSql(`create table "card_transactions" ("id" uuid not null, "organization_id" uuid not null, "card_id" uuid not null, "type" "card_transaction_type" not null, "status" "card_transaction_status" not null, "amount" numeric(38,0) not null, "balance_before" numeric(38,0) not null, "balance_after" numeric(38,0) not null, "fee_amount" numeric(38,0) not null default '0', "reference" text null, "merchant_name" text null, "failure_reason" text null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "card_transactions_pkey" primary key ("id"));`);
    this.addSql(`create index "card_transactions_card_id_created_at_id_index" on "card_transactions" ("card_id", "created_at", "id");`);
    this.addSql(`alter table "card_transactions" add constraint "card_transactions_organization_id_reference_unique" unique ("organization_id", "reference");`);

    this.addSql(`alter table "card_customers" add constraint "card_customers_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "cards" add constraint "cards_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "cards" add constraint "cards_customer_id_foreign" foreign key ("customer_id") references "card_customers" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "card_transactions" add constraint "card_transactions_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "card_transactions" add constraint "card_transactions_card_id_foreign" foreign key ("card_id") references "cards" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "cards" drop constraint "cards_customer_id_foreign";`);

    this.addSql(`alter table "card_transactions" drop constraint "card_transactions_card_id_foreign";`);

    this.addSql(`drop table if exists "card_customers" cascade;`);

    this.addSql(`drop table if exists "cards" cascade;`);

    this.addSql(`drop table if exists "card_transactions" cascade;`);

    this.addSql(`drop type "card_type";`);
    this.addSql(`drop type "card_status";`);
    this.addSql(`drop type "card_created_status";`);
    this.addSql(`drop type "card_transaction_type";`);
    this.addSql(`drop type "card_transaction_status";`);
  }

}
