import { Migration } from '@mikro-orm/migrations';

export class Migration20261123142835 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "devnet_chain" as enum ('bitcoin', 'ethereum', 'tron', 'solana');`);
    this.addSql(`create type "devnet_transaction_status" as enum ('mempool', 'mined');`);
    this.addSql(`create table "devnet_balances" ("chain" "devnet_chain" not null, "address" text not null, "asset_id" text not null, "amount" numeric(78,0) not null default '0', constraint "devnet_balances_pkey" primary key ("chain", "address", "asset_id"), constraint devnet_balances_amount_check check (amount >= 0));`);

    this.addSql(`create table "devnet_blocks" ("chain" "devnet_chain" not null, "height" int not null, "hash" text not null, "parent_hash" text not null, "time" timestamptz not null, "base_fee_per_gas" numeric(78,0) null, "gas_used" numeric(78,0) null, "produced_by" text null, constraint "devnet_blocks_pkey" primary key ("chain", "height"));`);
    this.addSql(`create index "devnet_blocks_produced_by_index" on "devnet_blocks" ("produced_by");`);
    this.addSql(`alter table "devnet_blocks" add constraint "devnet_blocks_chain_hash_unique" unique ("chain", "hash");`);

    this.addSql(`create table "devnet_nonces" ("chain" "devnet_chain" not null, "address" text not null, "nonce" numeric(78,0) not null default '0', constraint "devnet_nonces_pkey" primary key ("chain", "address"));`);

    this.addSql(`create table "devnet_outputs" ("chain" "devnet_chain" not null, "txid" text not null, "vout" int not null, "script" text not null, "address" text null, "amount" numeric(78,0) not null, "spent_by" text null, constraint "devnet_outputs_pkey" primary key ("chain", "txid", "vout"));`);
    this.addSql(`create index "devnet_outputs_chain_spent_by_index" on "devnet_outputs" ("chain", "spent_by");`);
    this.addSql(`create index "devnet_outputs_chain_address_index" on "devnet_outputs" ("chain", "address");`);

    this.addSql(`create table "devnet_transactions" ("chain" "devnet_chain" not null, "txid" text not null, "raw" text not null, "sender" text null, "nonce" numeric(78,0) null, "fee_bid" numeric(78,0) not null, "max_fee" numeric(78,0) not null, "fee_paid" numeric(78,0) null, "transfers" jsonb not null, "gas" jsonb null, "vsize" int null, "coinbase" boolean not null default false, "status" "devnet_transaction_status" not null default 'mempool', "block_height" int null, "block_index" int null, "accepted_at" timestamptz not null, constraint "devnet_transactions_pkey" primary key ("chain", "txid"));`);
    this.addSql(`create index "devnet_transactions_chain_sender_status_index" on "devnet_transactions" ("chain", "sender", "status");`);
    this.addSql(`create index "devnet_transactions_chain_block_height_index" on "devnet_transactions" ("chain", "block_height");`);
    this.addSql(`create index "devnet_transactions_chain_status_index" on "devnet_transactions" ("chain", "status");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "devnet_balances" cascade;`);

    this.addSql(`drop table if exists "devnet_blocks" cascade;`);

    this.addSql(`drop table if exists "devnet_nonces" cascade;`);

    this.addSql(`drop table if exists "devnet_outputs" cascade;`);

    this.addSql(`drop table if exists "devnet_transactions" cascade;`);

    this.addSql(`drop type "devnet_chain";`);
    this.addSql(`drop type "devnet_transaction_status";`);
  }

}
