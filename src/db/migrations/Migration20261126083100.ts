import { Migration } from '@mikro-orm/migrations';

/**
 * Outgoing transfers seen (issue 31, part 2): every transfer out of a custody address that block
 * scanning reads, the platform's own sends and spends it did not make, once per (organization,
 * chain, txid, position). A new table: nothing existing changes.
 */
export class Migration20261126083100 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "outgoing_transfers" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "wallet_id" uuid not null, "address_id" uuid not null, "chain" text not null, "network" text not null, "asset_id" text not null, "amount" numeric(78,0) not null, "fee" numeric(78,0) not null, "txid" text not null, "position" text not null, "from_address" text not null, "to_address" text null, "block_height" bigint not null, "block_hash" text not null, "transaction_id" uuid null, "unexpected" boolean not null, "created_at" timestamptz not null, constraint "outgoing_transfers_pkey" primary key ("id"));`);
    this.addSql(`create index "outgoing_transfers_wallet_id_created_at_index" on "outgoing_transfers" ("wallet_id", "created_at");`);
    this.addSql(`alter table "outgoing_transfers" add constraint "outgoing_transfers_organization_id_environment_ch_aee2d_unique" unique ("organization_id", "environment", "chain", "txid", "position");`);
    this.addSql(`alter table "outgoing_transfers" add constraint "outgoing_transfers_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "outgoing_transfers" add constraint "outgoing_transfers_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "outgoing_transfers" add constraint "outgoing_transfers_address_id_foreign" foreign key ("address_id") references "addresses" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "outgoing_transfers" cascade;`);
  }
}
