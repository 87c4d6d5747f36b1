import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 50, Stripe Issuing: a call Stripe refuses for the platform's key (a restricted key without a permission, a
 * key Stripe does not take) ends like any refusal, and is counted here per permission, so that /metrics tells the
 * operator which permission to grant (stripe_issuing_key_refusals_total).
 */
export class Migration20261201006301 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "stripe_issuing_key_refusals" ("permission" text not null, "last_operation" text not null, "refusals" int not null, "first_seen_at" timestamptz not null, "last_seen_at" timestamptz not null, constraint "stripe_issuing_key_refusals_pkey" primary key ("permission"));`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "stripe_issuing_key_refusals" cascade;`);
  }
}
