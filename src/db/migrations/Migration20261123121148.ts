import { Migration } from '@mikro-orm/migrations';

export class Migration20261123121148 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create unique index "lightning_invoices_active_payment_unique" on "lightning_invoices" ("organization_id", "payment_hash") where direction = 'outgoing' and status in ('pending', 'paid');`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "lightning_invoices_active_payment_unique";`);
  }

}
