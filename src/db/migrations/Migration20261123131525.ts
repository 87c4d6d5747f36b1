import { Migration } from '@mikro-orm/migrations';

/**
 * Idempotency records belong to one environment, and keep the response as the exact text sent
 * (sealed by the KeyProvider from now on).
 *
 * Existing records (24 h at most) do not say which key made them. They are assigned `live`: a
 * retry of a live request then still replays (no second live card or payment), while a sandbox
 * retry inside those 24 h runs again, which costs nothing real. Their bodies stay readable as
 * `clear` text until `cli migrate` (which runs these migrations) seals them right after.
 */
export class Migration20261123131525 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "idempotency_records" drop constraint "idempotency_records_organization_id_key_unique";`);

    this.addSql(`alter table "idempotency_records" add column "environment" "environment" null, add column "response_format" text null, add column "response_content_type" text null;`);
    this.addSql(`update "idempotency_records" set "environment" = 'live';`);
    this.addSql(`alter table "idempotency_records" alter column "environment" set not null;`);
    this.addSql(`alter table "idempotency_records" alter column "response_body" type text using ("response_body"::text);`);
    this.addSql(`update "idempotency_records" set "response_format" = 'clear', "response_content_type" = 'application/json' where "response_body" is not null;`);
    this.addSql(`alter table "idempotency_records" add constraint "idempotency_records_organization_id_environment_key_unique" unique ("organization_id", "environment", "key");`);
  }

  override async down(): Promise<void> {
    // Sealed responses mean nothing to the earlier code, and one key may now have a record per environment.
    this.addSql(`delete from "idempotency_records" where "response_format" = 'sealed_v1';`);
    this.addSql(`delete from "idempotency_records" r where "environment" = 'sandbox' and exists (select 1 from "idempotency_records" o where o."organization_id" = r."organization_id" and o."key" = r."key" and o."environment" = 'live');`);
    this.addSql(`alter table "idempotency_records" drop constraint "idempotency_records_organization_id_environment_key_unique";`);
    this.addSql(`alter table "idempotency_records" drop column "environment", drop column "response_format", drop column "response_content_type";`);

    this.addSql(`alter table "idempotency_records" alter column "response_body" type jsonb using ("response_body"::jsonb);`);
    this.addSql(`alter table "idempotency_records" add constraint "idempotency_records_organization_id_key_unique" unique ("organization_id", "key");`);
  }

}
