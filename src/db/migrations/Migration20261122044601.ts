import { Migration } from '@mikro-orm/migrations';

export class Migration20261122044601 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "wallet_type" as enum ('hot', 'cold', 'operational');`);
    this.addSql(`create type "hash_function" as enum ('no_op', 'sha256', 'keccak256', 'not_applicable');`);
    this.addSql(`create table "custody_account_counters" ("organization_id" uuid not null, "chain" text not null, "next_account" int not null, constraint "custody_account_counters_pkey" primary key ("organization_id", "chain"));`);

    this.addSql(`create table "organization_seeds" ("id" text not null, "organization_id" uuid not null, "envelope_version" smallint not null, "key_provider" text not null, "master_key_id" text not null, "wrapped_data_key" text not null, "mnemonic_ciphertext" text not null, "created_at" timestamptz not null, constraint "organization_seeds_pkey" primary key ("id"));`);
    this.addSql(`alter table "organization_seeds" add constraint "organization_seeds_organization_id_unique" unique ("organization_id");`);

    this.addSql(`create table "vaults" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "name" text not null, "customer_ref_id" text null, "metadata" jsonb not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "vaults_pkey" primary key ("id"));`);
    this.addSql(`create index "vaults_organization_id_environment_created_at_id_index" on "vaults" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`create table "wallets" ("id" uuid not null, "organization_id" uuid not null, "vault_id" uuid not null, "environment" "environment" not null, "name" text not null, "chain" text not null, "network" text not null, "wallet_type" "wallet_type" not null, "customer_ref_id" text null, "metadata" jsonb not null, "account_index" int not null, "next_address_index" int not null default 0, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "wallets_pkey" primary key ("id"));`);
    this.addSql(`create index "wallets_organization_id_environment_created_at_id_index" on "wallets" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "wallets" add constraint "wallets_organization_id_chain_account_index_unique" unique ("organization_id", "chain", "account_index");`);

    this.addSql(`create table "addresses" ("id" uuid not null, "organization_id" uuid not null, "wallet_id" uuid not null, "chain" text not null, "network" text not null, "address" text not null, "format" text not null, "address_index" int not null, "derivation_path" text not null, "is_primary" boolean not null default false, "label" text not null default '', "created_at" timestamptz not null, constraint "addresses_pkey" primary key ("id"));`);
    this.addSql(`create index "addresses_wallet_id_created_at_id_index" on "addresses" ("wallet_id", "created_at", "id");`);
    this.addSql(`alter table "addresses" add constraint "addresses_chain_network_address_unique" unique ("chain", "network", "address");`);
    this.addSql(`alter table "addresses" add constraint "addresses_wallet_id_address_index_unique" unique ("wallet_id", "address_index");`);

    this.addSql(`create table "signing_activities" ("id" uuid not null, "organization_id" uuid not null, "wallet_id" uuid not null, "address_id" uuid not null, "api_key_id" text not null, "seed_id" text not null, "derivation_path" text not null, "curve" text not null, "hash_function" "hash_function" not null, "payload_sha256" text not null, "signed_payload_sha256" text not null, "created_at" timestamptz not null, constraint "signing_activities_pkey" primary key ("id"));`);
    this.addSql(`create index "signing_activities_organization_id_created_at_id_index" on "signing_activities" ("organization_id", "created_at", "id");`);

    this.addSql(`create table "wallet_balances" ("wallet_id" uuid not null, "asset_id" text not null, "balance" numeric(78,0) not null default 0, "locked" numeric(78,0) not null default 0, "updated_at" timestamptz not null, constraint "wallet_balances_pkey" primary key ("wallet_id", "asset_id"));`);

    this.addSql(`alter table "custody_account_counters" add constraint "custody_account_counters_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "organization_seeds" add constraint "organization_seeds_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "vaults" add constraint "vaults_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "wallets" add constraint "wallets_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "wallets" add constraint "wallets_vault_id_foreign" foreign key ("vault_id") references "vaults" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "addresses" add constraint "addresses_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "addresses" add constraint "addresses_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "signing_activities" add constraint "signing_activities_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "signing_activities" add constraint "signing_activities_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "signing_activities" add constraint "signing_activities_address_id_foreign" foreign key ("address_id") references "addresses" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "wallet_balances" add constraint "wallet_balances_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "wallets" drop constraint "wallets_vault_id_foreign";`);

    this.addSql(`alter table "addresses" drop constraint "addresses_wallet_id_foreign";`);

    this.addSql(`alter table "signing_activities" drop constraint "signing_activities_wallet_id_foreign";`);

    this.addSql(`alter table "wallet_balances" drop constraint "wallet_balances_wallet_id_foreign";`);

    this.addSql(`alter table "signing_activities" drop constraint "signing_activities_address_id_foreign";`);

    this.addSql(`drop table if exists "custody_account_counters" cascade;`);

    this.addSql(`drop table if exists "organization_seeds" cascade;`);

    this.addSql(`drop table if exists "vaults" cascade;`);

    this.addSql(`drop table if exists "wallets" cascade;`);

    this.addSql(`drop table if exists "addresses" cascade;`);

    this.addSql(`drop table if exists "signing_activities" cascade;`);

    this.addSql(`drop table if exists "wallet_balances" cascade;`);

    this.addSql(`drop type "wallet_type";`);
    this.addSql(`drop type "hash_function";`);
  }

}
