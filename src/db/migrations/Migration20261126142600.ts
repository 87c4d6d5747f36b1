import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 33, item 2: live cards are minted by Stripe Issuing. A card keeps the issuer's id of its copy
 * (authorization requests name it; status and spending controls are synced to it), and a customer
 * the issuer's cardholder made for it, reused by its later cards.
 */
export class Migration20261126142600 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "cards" add column "issuer_card_id" text null;`);
    this.addSql(`create index "cards_issuer_card_id_index" on "cards" ("issuer_card_id");`);
    this.addSql(`alter table "card_customers" add column "issuer_cardholder_id" text null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "cards_issuer_card_id_index";`);
    this.addSql(`alter table "cards" drop column "issuer_card_id";`);
    this.addSql(`alter table "card_customers" drop column "issuer_cardholder_id";`);
  }
}
