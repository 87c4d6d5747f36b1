import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 32, items 4 and 7: the sandbox deposit helper's payments, which its daily cap per
 * organization sums; and the BIP-44 coin type each wallet derives under. Existing wallets keep the
 * one they always used (Bitcoin: 1 in the sandbox, 0 live; Ethereum 60, Tron 195, Solana 501 in
 * both), so their addresses never change; new sandbox wallets take 1 on every chain.
 */
export class Migration20261126105013 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "sandbox_deposits" ("id" uuid not null, "organization_id" uuid not null, "asset_id" text not null, "amount" numeric(78,0) not null, "txid" text not null, "created_at" timestamptz not null, constraint "sandbox_deposits_pkey" primary key ("id"));`);
    this.addSql(`create index "sandbox_deposits_organization_id_asset_id_created_at_index" on "sandbox_deposits" ("organization_id", "asset_id", "created_at");`);
    this.addSql(`alter table "sandbox_deposits" add constraint "sandbox_deposits_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "wallets" add column "coin_type" int null;`);
    this.addSql(`update "wallets" set "coin_type" = case "chain" when 'bitcoin' then (case "environment" when 'sandbox' then 1 else 0 end) when 'ethereum' then 60 when 'tron' then 195 when 'solana' then 501 end;`);
    this.addSql(`alter table "wallets" alter column "coin_type" set not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "sandbox_deposits" cascade;`);

    this.addSql(`alter table "wallets" drop column "coin_type";`);
  }
}
