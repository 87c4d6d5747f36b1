import { Migration } from '@mikro-orm/migrations';

/**
 * A live card's money follows Stripe Issuing after the authorization (src/cards/issuer-settlement.ts):
 * released holds (`reversal`), captures differing from the authorization (`capture_adjustment`) and
 * refunds (`refund`) are card transactions of their own types.
 */
export class Migration20261126173543 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter type "card_transaction_type" add value if not exists 'reversal';`);
    this.addSql(`alter type "card_transaction_type" add value if not exists 'capture_adjustment';`);
    this.addSql(`alter type "card_transaction_type" add value if not exists 'refund';`);
  }

  override async down(): Promise<void> {
    // PostgreSQL cannot drop an enum value: the type is rebuilt without them (their transactions go first).
    this.addSql(`delete from "card_transactions" where "type" in ('reversal', 'capture_adjustment', 'refund');`);
    this.addSql(`alter type "card_transaction_type" rename to "card_transaction_type_old";`);
    this.addSql(`create type "card_transaction_type" as enum ('funding', 'withdrawal', 'purchase');`);
    this.addSql(`alter table "card_transactions" alter column "type" type "card_transaction_type" using ("type"::text::"card_transaction_type");`);
    this.addSql(`drop type "card_transaction_type_old";`);
  }

}
