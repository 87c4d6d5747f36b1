import { Migration } from '@mikro-orm/migrations';

export class Migration20261123162149 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "fee_level" as enum ('low', 'medium', 'high');`);
    this.addSql(`create type "transaction_status" as enum ('pending', 'signed', 'broadcast', 'confirming', 'confirmed', 'failed');`);
    this.addSql(`create type "wallet_output_origin" as enum ('deposit', 'change');`);
    this.addSql(`create type "wallet_output_status" as enum ('unconfirmed', 'available', 'locked', 'spent');`);
    this.addSql(`create table "transactions" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "wallet_id" uuid not null, "chain" text not null, "network" text not null, "asset_id" text not null, "from_address_id" uuid not null, "to_address" text not null, "amount" numeric(78,0) not null, "gross" boolean not null default false, "recipient_amount" numeric(78,0) not null, "fee" numeric(78,0) null, "fee_limit" numeric(78,0) not null, "fee_terms" jsonb not null, "fee_level" "fee_level" not null, "fee_rate" text null, "max_fee_rate" text null, "pinned_inputs" jsonb null, "fill_fee_from_unselected" boolean not null default false, "locked_amount" numeric(78,0) not null, "locked_fee" numeric(78,0) not null, "note" text not null default '', "status" "transaction_status" not null default 'pending', "nonce" bigint null, "signed_transaction" text null, "tx_hash" text null, "block_height" bigint null, "block_hash" text null, "confirmations" int not null default 0, "required_confirmations" int not null, "amount_usd" text null, "policy_request" jsonb not null, "policy_decision" jsonb not null, "api_key_id" text not null, "failure_reason" text null, "failure_message" text null, "created_at" timestamptz not null, "updated_at" timestamptz not null, "broadcast_at" timestamptz null, "confirmed_at" timestamptz null, "failed_at" timestamptz null, constraint "transactions_pkey" primary key ("id"));`);
    this.addSql(`create index "transactions_chain_environment_tx_hash_index" on "transactions" ("chain", "environment", "tx_hash");`);
    this.addSql(`create index "transactions_wallet_id_created_at_id_index" on "transactions" ("wallet_id", "created_at", "id");`);
    this.addSql(`create index "transactions_organization_id_environment_created_at_id_index" on "transactions" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`create table "wallet_outputs" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "wallet_id" uuid not null, "address_id" uuid not null, "txid" text not null, "vout" int not null, "amount" numeric(78,0) not null, "origin" "wallet_output_origin" not null, "status" "wallet_output_status" not null default 'unconfirmed', "spent_by_id" uuid null, "created_by_id" uuid null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "wallet_outputs_pkey" primary key ("id"));`);
    this.addSql(`create index "wallet_outputs_wallet_id_status_index" on "wallet_outputs" ("wallet_id", "status");`);
    this.addSql(`alter table "wallet_outputs" add constraint "wallet_outputs_environment_txid_vout_unique" unique ("environment", "txid", "vout");`);

    this.addSql(`alter table "transactions" add constraint "transactions_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "transactions" add constraint "transactions_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "transactions" add constraint "transactions_from_address_id_foreign" foreign key ("from_address_id") references "addresses" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "wallet_outputs" add constraint "wallet_outputs_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "wallet_outputs" add constraint "wallet_outputs_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "wallet_outputs" add constraint "wallet_outputs_address_id_foreign" foreign key ("address_id") references "addresses" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "wallet_outputs" add constraint "wallet_outputs_spent_by_id_foreign" foreign key ("spent_by_id") references "transactions" ("id") on update cascade on delete set null;`);
    this.addSql(`alter table "wallet_outputs" add constraint "wallet_outputs_created_by_id_foreign" foreign key ("created_by_id") references "transactions" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "wallet_outputs" drop constraint "wallet_outputs_spent_by_id_foreign";`);

    this.addSql(`alter table "wallet_outputs" drop constraint "wallet_outputs_created_by_id_foreign";`);

    this.addSql(`drop table if exists "transactions" cascade;`);

    this.addSql(`drop table if exists "wallet_outputs" cascade;`);

    this.addSql(`drop type "fee_level";`);
    this.addSql(`drop type "transaction_status";`);
    this.addSql(`drop type "wallet_output_origin";`);
    this.addSql(`drop type "wallet_output_status";`);
  }

}
