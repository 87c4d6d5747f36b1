import { Migration } from '@mikro-orm/migrations';

export class Migration20261123130132 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`drop index "company_balance_entries_organization_id_created_at_id_index";`);
    this.addSql(`alter table "company_balance_entries" drop constraint "company_balance_entries_organization_id_currency__a6e1c_unique";`);

    // Each journal entry takes the environment of what moved it; balances are then rebuilt per environment from the journal.
    this.addSql(`alter table "company_balance_entries" add column "environment" "environment" null;`);
    this.addSql(`update "company_balance_entries" e set "environment" = coalesce(
        (select c."environment" from "card_transactions" t join "cards" c on c."id" = t."card_id" where e."reference_type" = 'card_transaction' and t."id"::text = e."reference_id"),
        (select c."environment" from "cards" c where e."reference_type" = 'card_termination' and c."id"::text = e."reference_id"),
        (select l."environment" from "lightning_invoices" l where e."reference_type" in ('lightning_invoice', 'lightning_payment') and l."id"::text = e."reference_id"),
        'sandbox');`);
    this.addSql(`alter table "company_balance_entries" alter column "environment" set not null;`);
    this.addSql(`create index "company_balance_entries_organization_id_environmen_8d09e_index" on "company_balance_entries" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "company_balance_entries" add constraint "company_balance_entries_organization_id_environme_a5337_unique" unique ("organization_id", "environment", "currency", "reference_type", "reference_id", "kind");`);

    this.addSql(`alter table "company_balances" drop constraint "company_balances_organization_id_currency_unique";`);

    this.addSql(`delete from "company_balances";`);
    this.addSql(`alter table "company_balances" add column "environment" "environment" not null;`);
    this.addSql(`alter table "company_balances" add constraint "company_balances_organization_id_environment_currency_unique" unique ("organization_id", "environment", "currency");`);
    this.addSql(`insert into "company_balances" ("id", "organization_id", "environment", "currency", "available", "reserved", "updated_at")
      select 'bal_' || md5("organization_id"::text || "environment"::text || "currency"::text), "organization_id", "environment", "currency",
        sum(case "kind" when 'credit' then "amount" when 'debit' then -"amount" when 'reserve' then -"amount" when 'release' then "amount" else 0 end),
        sum(case "kind" when 'reserve' then "amount" when 'release' then -"amount" when 'capture' then -"amount" else 0 end),
        now()
      from "company_balance_entries" group by "organization_id", "environment", "currency";`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "company_balance_entries_organization_id_environmen_8d09e_index";`);
    this.addSql(`alter table "company_balance_entries" drop constraint "company_balance_entries_organization_id_environme_a5337_unique";`);
    this.addSql(`alter table "company_balance_entries" drop column "environment";`);

    this.addSql(`create index "company_balance_entries_organization_id_created_at_id_index" on "company_balance_entries" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "company_balance_entries" add constraint "company_balance_entries_organization_id_currency__a6e1c_unique" unique ("organization_id", "currency", "reference_type", "reference_id", "kind");`);

    this.addSql(`alter table "company_balances" drop constraint "company_balances_organization_id_environment_currency_unique";`);
    this.addSql(`alter table "company_balances" drop column "environment";`);

    this.addSql(`alter table "company_balances" add constraint "company_balances_organization_id_currency_unique" unique ("organization_id", "currency");`);
  }

}
