import { Migration } from '@mikro-orm/migrations';

export class Migration20261123130939 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`drop index "lightning_invoices_organization_id_created_at_id_index";`);
    this.addSql(`alter table "lightning_invoices" drop constraint "lightning_invoices_organization_id_direction_reference_unique";`);

    // Every Lightning record already carries its environment (from the key that created it); references and the
    // one-active-payment-per-invoice rule now hold within one environment, and lookups filter by it.
    // max_fee as the caller gave it: payments recorded before this migration count as given none (null).
    this.addSql(`alter table "lightning_invoices" add column "max_fee_msat" numeric(20,0) null;`);
    this.addSql(`create index "lightning_invoices_organization_id_environment_cre_22d03_index" on "lightning_invoices" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`alter table "lightning_invoices" add constraint "lightning_invoices_organization_id_environment_di_4e981_unique" unique ("organization_id", "environment", "direction", "reference");`);
    this.addSql(`drop index "lightning_invoices_active_payment_unique";`);
    this.addSql(`create unique index "lightning_invoices_active_payment_unique" on "lightning_invoices" ("organization_id", "environment", "payment_hash") where direction = 'outgoing' and status in ('pending', 'paid');`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "lightning_invoices_active_payment_unique";`);
    this.addSql(`create unique index "lightning_invoices_active_payment_unique" on "lightning_invoices" ("organization_id", "payment_hash") where direction = 'outgoing' and status in ('pending', 'paid');`);
    this.addSql(`drop index "lightning_invoices_organization_id_environment_cre_22d03_index";`);
    this.addSql(`alter table "lightning_invoices" drop constraint "lightning_invoices_organization_id_environment_di_4e981_unique";`);
    this.addSql(`alter table "lightning_invoices" drop column "max_fee_msat";`);

    this.addSql(`create index "lightning_invoices_organization_id_created_at_id_index" on "lightning_invoices" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "lightning_invoices" add constraint "lightning_invoices_organization_id_direction_reference_unique" unique ("organization_id", "direction", "reference");`);
  }

}
