import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 50, held payments in the API: the kind of failure that holds a payment (held_reason_code), what
 * its API shows; held_reason keeps the node's own words for the operator. A payment held before this
 * migration gets the kind its recorded words name (those lnd.ts writes), else node_error.
 */
export class Migration20261201006201 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "lightning_invoices" add column "held_reason_code" text null;`);
    this.addSql(
      `update "lightning_invoices" set "held_reason_code" = case
         when "held_reason" like '% did not answer: %' then 'unreachable'
         when "held_reason" like '% runs on %; this environment pays %' then 'network_mismatch'
         when "held_reason" like 'The LND macaroon at % beyond what the service uses%' then 'macaroon_too_broad'
         else 'node_error' end
       where "held_at" is not null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "lightning_invoices" drop column "held_reason_code";`);
  }
}
