import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 50, missed credits: lightning_invoice_cursors keeps, per environment and LND node, the
 * settle_index and add_index of the last invoices settled into the ledger, so a watch starting again
 * subscribes from them rather than from memory. Empty at first: a node without a cursor is caught up
 * by listing its invoices once.
 */
export class Migration20261201005002 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "lightning_invoice_cursors" ("environment" "environment" not null, "node_pubkey" text not null, "settle_index" bigint not null, "add_index" bigint not null, "updated_at" timestamptz not null, constraint "lightning_invoice_cursors_pkey" primary key ("environment", "node_pubkey"));`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "lightning_invoice_cursors" cascade;`);
  }
}
