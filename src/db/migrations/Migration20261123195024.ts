import { Migration } from '@mikro-orm/migrations';

export class Migration20261123195024 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create table "address_book_entries" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "chain" text not null, "network" text not null, "address" text not null, "label" text not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "address_book_entries_pkey" primary key ("id"));`);
    this.addSql(`create index "address_book_entries_organization_id_environment_c_5e48b_index" on "address_book_entries" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "address_book_entries" add constraint "address_book_entries_organization_id_environment__165a5_unique" unique ("organization_id", "environment", "chain", "address");`);

    this.addSql(`create table "consolidation_rules" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "vault_id" uuid not null, "chain" text not null, "network" text not null, "enabled" boolean not null default true, "destination_type" text not null, "destination_address_book_id" uuid null, "destination_vault_id" uuid null, "gas_source" text not null, "gas_station_id" uuid null, "assets" jsonb not null, "trigger_type" text not null, "schedule_cron" text null, "threshold_basis" text null, "threshold_currency" text null, "threshold_value" text null, "min_consolidate_usd" text null, "active_run_id" uuid null, "deleted_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "consolidation_rules_pkey" primary key ("id"));`);
    this.addSql(`create index "consolidation_rules_vault_id_chain_enabled_index" on "consolidation_rules" ("vault_id", "chain", "enabled");`);
    this.addSql(`create index "consolidation_rules_organization_id_environment_cr_f6a8e_index" on "consolidation_rules" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`create table "consolidation_runs" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "rule_id" uuid not null, "vault_id" uuid not null, "chain" text not null, "network" text not null, "status" text not null, "trigger_source" text not null, "initiated_by_user_id" text null, "addresses_scanned" int not null default 0, "transfers_created" int not null default 0, "transfers_confirmed" int not null default 0, "transfers_failed" int not null default 0, "recorded_triggers" jsonb null, "failure_reason" text null, "started_at" timestamptz null, "completed_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "consolidation_runs_pkey" primary key ("id"));`);
    this.addSql(`create index "consolidation_runs_status_created_at_index" on "consolidation_runs" ("status", "created_at");`);
    this.addSql(`create index "consolidation_runs_rule_id_created_at_index" on "consolidation_runs" ("rule_id", "created_at");`);
    this.addSql(`create index "consolidation_runs_organization_id_environment_cre_2c1d7_index" on "consolidation_runs" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`create table "consolidation_sweeps" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "rule_id" uuid not null, "run_id" uuid not null, "chain" text not null, "network" text not null, "wallet_id" uuid not null, "source_address_id" uuid not null, "destination_address" text not null, "asset_id" text not null, "amount" numeric(78,0) not null, "gas_source" text not null, "status" text not null, "failure_reason" text null, "transaction_id" uuid null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "consolidation_sweeps_pkey" primary key ("id"));`);
    this.addSql(`create index "consolidation_sweeps_rule_id_status_index" on "consolidation_sweeps" ("rule_id", "status");`);
    this.addSql(`create index "consolidation_sweeps_run_id_created_at_id_index" on "consolidation_sweeps" ("run_id", "created_at", "id");`);
    this.addSql(`create index "consolidation_sweeps_organization_id_environment_c_59c48_index" on "consolidation_sweeps" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "consolidation_sweeps" add constraint "consolidation_sweeps_run_id_source_address_id_asset_id_unique" unique ("run_id", "source_address_id", "asset_id");`);

    this.addSql(`alter table "address_book_entries" add constraint "address_book_entries_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "consolidation_rules" add constraint "consolidation_rules_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_rules" add constraint "consolidation_rules_vault_id_foreign" foreign key ("vault_id") references "vaults" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_rules" add constraint "consolidation_rules_destination_address_book_id_foreign" foreign key ("destination_address_book_id") references "address_book_entries" ("id") on update cascade on delete restrict;`);
    this.addSql(`alter table "consolidation_rules" add constraint "consolidation_rules_destination_vault_id_foreign" foreign key ("destination_vault_id") references "vaults" ("id") on update cascade on delete restrict;`);
    this.addSql(`alter table "consolidation_rules" add constraint "consolidation_rules_gas_station_id_foreign" foreign key ("gas_station_id") references "gas_stations" ("id") on update cascade on delete restrict;`);

    this.addSql(`alter table "consolidation_runs" add constraint "consolidation_runs_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_runs" add constraint "consolidation_runs_rule_id_foreign" foreign key ("rule_id") references "consolidation_rules" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_runs" add constraint "consolidation_runs_vault_id_foreign" foreign key ("vault_id") references "vaults" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "consolidation_sweeps" add constraint "consolidation_sweeps_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_sweeps" add constraint "consolidation_sweeps_rule_id_foreign" foreign key ("rule_id") references "consolidation_rules" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_sweeps" add constraint "consolidation_sweeps_run_id_foreign" foreign key ("run_id") references "consolidation_runs" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_sweeps" add constraint "consolidation_sweeps_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_sweeps" add constraint "consolidation_sweeps_source_address_id_foreign" foreign key ("source_address_id") references "addresses" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "consolidation_sweeps" add constraint "consolidation_sweeps_transaction_id_foreign" foreign key ("transaction_id") references "transactions" ("id") on update cascade on delete set null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "consolidation_rules" drop constraint "consolidation_rules_destination_address_book_id_foreign";`);

    this.addSql(`alter table "consolidation_runs" drop constraint "consolidation_runs_rule_id_foreign";`);

    this.addSql(`alter table "consolidation_sweeps" drop constraint "consolidation_sweeps_rule_id_foreign";`);

    this.addSql(`alter table "consolidation_sweeps" drop constraint "consolidation_sweeps_run_id_foreign";`);

    this.addSql(`drop table if exists "address_book_entries" cascade;`);

    this.addSql(`drop table if exists "consolidation_rules" cascade;`);

    this.addSql(`drop table if exists "consolidation_runs" cascade;`);

    this.addSql(`drop table if exists "consolidation_sweeps" cascade;`);
  }

}
