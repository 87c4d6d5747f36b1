import { Migration } from '@mikro-orm/migrations';

export class Migration20261123194316 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create table "sponsorships" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "kind" text not null, "funding_model" text not null, "station_id" uuid not null, "chain" text not null, "sender_address" text not null, "fuel_amount" numeric(78,0) not null, "fuel_transaction_id" uuid not null, "budget_charge" numeric(78,0) not null, "budget_charge_usd" text null, "sponsored_transaction_id" uuid null, "signed_transaction" text null, "tx_hash" text null, "to_address" text null, "asset_id" text null, "amount" numeric(78,0) null, "broadcast_accepted" boolean not null default false, "status" text not null, "failure_reason" text null, "failure_message" text null, "created_at" timestamptz not null, "updated_at" timestamptz not null, constraint "sponsorships_pkey" primary key ("id"));`);
    this.addSql(`create index "sponsorships_status_created_at_index" on "sponsorships" ("status", "created_at");`);
    this.addSql(`create index "sponsorships_station_id_created_at_index" on "sponsorships" ("station_id", "created_at");`);
    this.addSql(`create index "sponsorships_organization_id_environment_created_at_id_index" on "sponsorships" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "sponsorships" add constraint "sponsorships_environment_chain_tx_hash_unique" unique ("environment", "chain", "tx_hash");`);

    this.addSql(`alter table "sponsorships" add constraint "sponsorships_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "sponsorships" add constraint "sponsorships_station_id_foreign" foreign key ("station_id") references "gas_stations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "sponsorships" add constraint "sponsorships_fuel_transaction_id_foreign" foreign key ("fuel_transaction_id") references "transactions" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "sponsorships" add constraint "sponsorships_sponsored_transaction_id_foreign" foreign key ("sponsored_transaction_id") references "transactions" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "gas_stations" add column "daily_sponsorship_budget" numeric(78,0) null;`);

    this.addSql(`alter table "transactions" add column "sponsorship_id" uuid null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "sponsorships" cascade;`);

    this.addSql(`alter table "gas_stations" drop column "daily_sponsorship_budget";`);

    this.addSql(`alter table "transactions" drop column "sponsorship_id";`);
  }

}
