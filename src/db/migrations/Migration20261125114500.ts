import { Migration } from '@mikro-orm/migrations';

/**
 * Incoming Lightning invoices expire by a sweep (the `lightning-invoice-expiry` Schedule) rather
 * than one workflow each: its scan of pending incoming invoices by deadline gets a partial index.
 */
export class Migration20261125114500 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index "lightning_invoices_pending_expiry_index" on "lightning_invoices" ("expires_at") where status = 'pending' and direction = 'incoming';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "lightning_invoices_pending_expiry_index";`);
  }
}
