import { Migration } from '@mikro-orm/migrations';

/**
 * Customers and card transactions belong to one environment, as cards already do. A transaction
 * takes its card's; a customer takes its cards' (sandbox when it has none). A customer with cards
 * in both environments stays the sandbox customer and gets a live copy (same identity, a
 * deterministic new id) that its live cards then point to.
 */
export class Migration20261123131103 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`drop index "card_customers_organization_id_created_at_id_index";`);
    this.addSql(`alter table "card_customers" drop constraint "card_customers_organization_id_id_type_id_number_country_unique";`);

    this.addSql(`alter table "card_customers" add column "environment" "environment" null;`);
    this.addSql(`update "card_customers" c set "environment" = case
        when exists (select 1 from "cards" k where k."customer_id" = c."id" and k."environment" = 'sandbox') then 'sandbox'::"environment"
        when exists (select 1 from "cards" k where k."customer_id" = c."id" and k."environment" = 'live') then 'live'::"environment"
        else 'sandbox'::"environment" end;`);
    this.addSql(`insert into "card_customers" ("id", "organization_id", "environment", "customer_type", "first_name", "last_name", "email", "phone_number",
        "dial_code", "date_of_birth", "id_type", "id_number", "address", "country", "created_at", "updated_at")
      select md5(c."id"::text || ':live')::uuid, c."organization_id", 'live', c."customer_type", c."first_name", c."last_name", c."email", c."phone_number",
        c."dial_code", c."date_of_birth", c."id_type", c."id_number", c."address", c."country", c."created_at", c."updated_at"
      from "card_customers" c
      where c."environment" = 'sandbox' and exists (select 1 from "cards" k where k."customer_id" = c."id" and k."environment" = 'live');`);
    this.addSql(`update "cards" k set "customer_id" = md5(k."customer_id"::text || ':live')::uuid
      from "card_customers" c where c."id" = k."customer_id" and c."environment" = 'sandbox' and k."environment" = 'live';`);
    this.addSql(`alter table "card_customers" alter column "environment" set not null;`);
    this.addSql(`create index "card_customers_organization_id_environment_created_at_id_index" on "card_customers" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "card_customers" add constraint "card_customers_organization_id_environment_id_typ_34da2_unique" unique ("organization_id", "environment", "id_type", "id_number", "country");`);

    this.addSql(`drop index "cards_organization_id_created_at_id_index";`);

    this.addSql(`create index "cards_organization_id_environment_created_at_id_index" on "cards" ("organization_id", "environment", "created_at", "id");`);

    this.addSql(`alter table "card_transactions" drop constraint "card_transactions_organization_id_reference_unique";`);

    this.addSql(`alter table "card_transactions" add column "environment" "environment" null;`);
    this.addSql(`update "card_transactions" t set "environment" = k."environment" from "cards" k where k."id" = t."card_id";`);
    this.addSql(`alter table "card_transactions" alter column "environment" set not null;`);
    this.addSql(`alter table "card_transactions" add constraint "card_transactions_organization_id_environment_reference_unique" unique ("organization_id", "environment", "reference");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "card_customers_organization_id_environment_created_at_id_index";`);
    this.addSql(`alter table "card_customers" drop constraint "card_customers_organization_id_environment_id_typ_34da2_unique";`);
    // Live customers with a sandbox twin (same identity) fold back into it.
    this.addSql(`update "cards" k set "customer_id" = s."id"
      from "card_customers" l join "card_customers" s on s."organization_id" = l."organization_id" and s."environment" = 'sandbox'
        and s."id_type" = l."id_type" and s."id_number" = l."id_number" and s."country" = l."country"
      where l."environment" = 'live' and k."customer_id" = l."id";`);
    this.addSql(`delete from "card_customers" l where l."environment" = 'live' and exists (select 1 from "card_customers" s where s."organization_id" = l."organization_id"
        and s."environment" = 'sandbox' and s."id_type" = l."id_type" and s."id_number" = l."id_number" and s."country" = l."country");`);
    this.addSql(`alter table "card_customers" drop column "environment";`);

    this.addSql(`create index "card_customers_organization_id_created_at_id_index" on "card_customers" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "card_customers" add constraint "card_customers_organization_id_id_type_id_number_country_unique" unique ("organization_id", "id_type", "id_number", "country");`);

    this.addSql(`alter table "card_transactions" drop constraint "card_transactions_organization_id_environment_reference_unique";`);
    this.addSql(`alter table "card_transactions" drop column "environment";`);

    this.addSql(`alter table "card_transactions" add constraint "card_transactions_organization_id_reference_unique" unique ("organization_id", "reference");`);

    this.addSql(`drop index "cards_organization_id_environment_created_at_id_index";`);

    this.addSql(`create index "cards_organization_id_created_at_id_index" on "cards" ("organization_id", "created_at", "id");`);
  }

}
