import { Migration } from '@mikro-orm/migrations';

export class Migration20261123142527 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "incoming_transfer_status" as enum ('pending', 'confirmed', 'dropped');`);
    this.addSql(`create table "chain_scan_cursors" ("chain" text not null, "environment" "environment" not null, "network" text not null, "height" bigint not null, "hash" text not null, "updated_at" timestamptz not null, constraint "chain_scan_cursors_pkey" primary key ("chain", "environment"));`);

    this.addSql(`create table "scanned_blocks" ("chain" text not null, "environment" "environment" not null, "height" bigint not null, "hash" text not null, "scanned_at" timestamptz not null, constraint "scanned_blocks_pkey" primary key ("chain", "environment", "height"));`);

    this.addSql(`create table "incoming_transfers" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "wallet_id" uuid null, "address_id" uuid null, "chain" text not null, "network" text not null, "asset_id" text not null, "amount" numeric(78,0) not null, "txid" text not null, "position" text not null, "to_address" text not null, "from_address" text null, "block_height" bigint null, "block_hash" text null, "confirmations" int not null default 0, "required_confirmations" int not null, "status" "incoming_transfer_status" not null default 'pending', "confirmed_at" timestamptz null, "dropped_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "incoming_transfers_pkey" primary key ("id"));`);
    this.addSql(`create index "incoming_transfers_chain_environment_status_block_height_index" on "incoming_transfers" ("chain", "environment", "status", "block_height");`);
    this.addSql(`create index "incoming_transfers_organization_id_environment_cre_96f65_index" on "incoming_transfers" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "incoming_transfers" add constraint "incoming_transfers_organization_id_environment_ch_019ac_unique" unique ("organization_id", "environment", "chain", "txid", "position");`);

    this.addSql(`alter table "incoming_transfers" add constraint "incoming_transfers_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "incoming_transfers" add constraint "incoming_transfers_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "incoming_transfers" add constraint "incoming_transfers_address_id_foreign" foreign key ("address_id") references "addresses" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "wallet_balances" add column "pending" numeric(78,0) not null default 0;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "chain_scan_cursors" cascade;`);

    this.addSql(`drop table if exists "scanned_blocks" cascade;`);

    this.addSql(`drop table if exists "incoming_transfers" cascade;`);

    this.addSql(`alter table "wallet_balances" drop column "pending";`);

    this.addSql(`drop type "incoming_transfer_status";`);
  }

}
