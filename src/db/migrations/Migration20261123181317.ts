import { Migration } from '@mikro-orm/migrations';

export class Migration20261123181317 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create table "gas_stations" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "name" text not null, "chain" text not null, "network" text not null, "wallet_id" uuid not null, "address" text not null, "threshold" numeric(78,0) not null, "refill_amount" numeric(78,0) null, "refill_from_wallet_id" uuid null, "auto_refill_enabled" boolean not null default false, "gas_strategy" text not null default 'standard', "max_gas_price" text null, "status" text not null default 'active', "refill_transaction_id" uuid null, "refill_failed_at" timestamptz null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "gas_stations_pkey" primary key ("id"));`);
    this.addSql(`create index "gas_stations_organization_id_environment_created_at_id_index" on "gas_stations" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "gas_stations" add constraint "gas_stations_wallet_id_unique" unique ("wallet_id");`);
    this.addSql(`alter table "gas_stations" add constraint "gas_stations_organization_id_environment_chain_unique" unique ("organization_id", "environment", "chain");`);

    this.addSql(`alter table "gas_stations" add constraint "gas_stations_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "gas_stations" add constraint "gas_stations_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "gas_stations" add constraint "gas_stations_refill_from_wallet_id_foreign" foreign key ("refill_from_wallet_id") references "wallets" ("id") on update cascade on delete set null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "gas_stations" cascade;`);
  }

}
