import { Migration } from '@mikro-orm/migrations';

export class Migration20261122044628 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "destination_kind" as enum ('webhook', 'subscription', 'card');`);
    this.addSql(`create type "delivery_status" as enum ('pending', 'delivered', 'failed');`);
    this.addSql(`create type "subscription_status" as enum ('active', 'disabled', 'failed');`);
    this.addSql(`create type "webhook_status" as enum ('enabled', 'disabled');`);
    this.addSql(`create table "events" ("id" text not null, "organization_id" uuid not null, "type" text not null, "data" jsonb not null, "dedupe_key" text null, "created_at" timestamptz not null, constraint "events_pkey" primary key ("id"));`);
    this.addSql(`create index "events_organization_id_created_at_id_index" on "events" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "events" add constraint "events_organization_id_dedupe_key_unique" unique ("organization_id", "dedupe_key");`);

    this.addSql(`create table "event_deliveries" ("id" text not null, "organization_id" uuid not null, "event_id" text not null, "type" text not null, "destination_kind" "destination_kind" not null, "destination_id" text not null, "destination_url" text not null, "status" "delivery_status" not null default 'pending', "attempts" int not null default 0, "run" int not null default 1, "max_attempts" int null, "last_http_status" int null, "error_message" text null, "next_retry_at" timestamptz null, "delivered_at" timestamptz null, "dispatched_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "event_deliveries_pkey" primary key ("id"));`);
    this.addSql(`create index "event_deliveries_dispatched_at_updated_at_index" on "event_deliveries" ("dispatched_at", "updated_at");`);
    this.addSql(`create index "event_deliveries_organization_id_created_at_id_index" on "event_deliveries" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "event_deliveries" add constraint "event_deliveries_event_id_destination_kind_destin_b5605_unique" unique ("event_id", "destination_kind", "destination_id");`);

    this.addSql(`create table "event_delivery_attempts" ("id" text not null, "delivery_id" text not null, "run" int not null, "attempt" int not null, "attempted_at" timestamptz not null, "http_status" int null, "error_message" text null, "duration_ms" int null, "completed_at" timestamptz null, constraint "event_delivery_attempts_pkey" primary key ("id"));`);
    this.addSql(`alter table "event_delivery_attempts" add constraint "event_delivery_attempts_delivery_id_run_attempt_unique" unique ("delivery_id", "run", "attempt");`);

    this.addSql(`create table "subscriptions" ("id" text not null, "organization_id" uuid not null, "environment" "environment" not null, "address" text not null, "chain" text not null, "network" text not null, "webhook_url" text not null, "event_type" text not null default '', "label" text null, "metadata" jsonb not null, "status" "subscription_status" not null default 'active', "failure_reason" text null, "api_version" text not null, "max_attempts" int null, "secret_current" text not null, "secret_previous" text null, "secret_previous_expires_at" timestamptz null, "last_event_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, "deleted_at" timestamptz null, constraint "subscriptions_pkey" primary key ("id"));`);
    this.addSql(`create index "subscriptions_chain_address_index" on "subscriptions" ("chain", "address");`);
    this.addSql(`create index "subscriptions_organization_id_created_at_id_index" on "subscriptions" ("organization_id", "created_at", "id");`);

    this.addSql(`create table "webhook_endpoints" ("id" text not null, "organization_id" uuid not null, "environment" "environment" not null, "name" text not null, "url" text not null, "event_types" text[] not null, "status" "webhook_status" not null default 'enabled', "disabled_reason" text null, "api_version" text not null, "max_attempts" int null, "secret_current" text not null, "secret_previous" text null, "secret_previous_expires_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, "deleted_at" timestamptz null, constraint "webhook_endpoints_pkey" primary key ("id"));`);
    this.addSql(`create index "webhook_endpoints_organization_id_created_at_id_index" on "webhook_endpoints" ("organization_id", "created_at", "id");`);

    this.addSql(`alter table "events" add constraint "events_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "event_deliveries" add constraint "event_deliveries_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "event_deliveries" add constraint "event_deliveries_event_id_foreign" foreign key ("event_id") references "events" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "event_delivery_attempts" add constraint "event_delivery_attempts_delivery_id_foreign" foreign key ("delivery_id") references "event_deliveries" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "subscriptions" add constraint "subscriptions_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "webhook_endpoints" add constraint "webhook_endpoints_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "event_deliveries" drop constraint "event_deliveries_event_id_foreign";`);

    this.addSql(`alter table "event_delivery_attempts" drop constraint "event_delivery_attempts_delivery_id_foreign";`);

    this.addSql(`drop table if exists "events" cascade;`);

    this.addSql(`drop table if exists "event_deliveries" cascade;`);

    this.addSql(`drop table if exists "event_delivery_attempts" cascade;`);

    this.addSql(`drop table if exists "subscriptions" cascade;`);

    this.addSql(`drop table if exists "webhook_endpoints" cascade;`);

    this.addSql(`drop type "destination_kind";`);
    this.addSql(`drop type "delivery_status";`);
    this.addSql(`drop type "subscription_status";`);
    this.addSql(`drop type "webhook_status";`);
  }

}
