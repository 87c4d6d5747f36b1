import { Migration } from '@mikro-orm/migrations';

/**
 * A PSBT input is signed by its sighash, which the service computes (hash_function `psbt`,
 * src/custody/signed-payloads/bitcoin.ts): signing activities record it as their hash function.
 */
export class Migration20261129060001 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter type "hash_function" add value if not exists 'psbt';`);
  }

  override async down(): Promise<void> {
    // PostgreSQL cannot drop an enum value: the type is rebuilt without it (its activities go first).
    this.addSql(`delete from "signing_activities" where "hash_function" = 'psbt';`);
    this.addSql(`alter type "hash_function" rename to "hash_function_old";`);
    this.addSql(`create type "hash_function" as enum ('no_op', 'sha256', 'keccak256', 'not_applicable', 'eip712');`);
    this.addSql(`alter table "signing_activities" alter column "hash_function" type "hash_function" using ("hash_function"::text::"hash_function");`);
    this.addSql(`drop type "hash_function_old";`);
  }

}
