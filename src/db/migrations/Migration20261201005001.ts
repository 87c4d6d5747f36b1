import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 50, LND payments: a payment hash is paid at most once per node across organizations
 * (lightning_payment_claims, unique on node and hash), and a payment whose send kept failing for a
 * transient reason is held for an operator (held_at, held_reason) rather than retried unseen.
 */
export class Migration20261201005001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "lightning_payment_claims" ("node_key" text not null, "payment_hash" text not null, "payment_id" uuid not null, "created_at" timestamptz not null, constraint "lightning_payment_claims_pkey" primary key ("node_key", "payment_hash"));`);
    this.addSql(`create index "lightning_payment_claims_payment_id_index" on "lightning_payment_claims" ("payment_id");`);
    this.addSql(`alter table "lightning_payment_claims" add constraint "lightning_payment_claims_payment_id_foreign" foreign key ("payment_id") references "lightning_invoices" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "lightning_invoices" add column "held_at" timestamptz null, add column "held_reason" text null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "lightning_payment_claims" cascade;`);
    this.addSql(`alter table "lightning_invoices" drop column "held_at", drop column "held_reason";`);
  }
}
