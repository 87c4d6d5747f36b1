import { Migration } from '@mikro-orm/migrations';

export class Migration20261122045925 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "balance_currency" as enum ('usd', 'sat');`);
    this.addSql(`create type "balance_entry_kind" as enum ('credit', 'debit', 'reserve', 'release', 'capture');`);
    this.addSql(`create table "company_balance_entries" ("id" text not null, "organization_id" uuid not null, "currency" "balance_currency" not null, "kind" "balance_entry_kind" not null, "amount" numeric(38,0) not null, "reference_type" text not null, "reference_id" text not null, "created_at" timestamptz not null, constraint "company_balance_entries_pkey" primary key ("id"));`);
    this.addSql(`create index "company_balance_entries_organization_id_created_at_id_index" on "company_balance_entries" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "company_balance_entries" add constraint "company_balance_entries_organization_id_currency__a6e1c_unique" unique ("organization_id", "currency", "reference_type", "reference_id", "kind");`);

    this.addSql(`create table "company_balances" ("id" text not null, "organization_id" uuid not null, "currency" "balance_currency" not null, "available" numeric(38,0) not null default 0, "reserved" numeric(38,0) not null default 0, "updated_at" timestamptz not null, constraint "company_balances_pkey" primary key ("id"));`);
    this.addSql(`alter table "company_balances" add constraint "company_balances_organization_id_currency_unique" unique ("organization_id", "currency");`);

    this.addSql(`alter table "company_balance_entries" add constraint "company_balance_entries_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "company_balances" add constraint "company_balances_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "company_balance_entries" cascade;`);

    this.addSql(`drop table if exists "company_balances" cascade;`);

    this.addSql(`drop type "balance_currency";`);
    this.addSql(`drop type "balance_entry_kind";`);
  }

}
