import { Migration } from '@mikro-orm/migrations';

/**
 * EIP-712 typed data is signed by its digest, which the service computes (hash_function `eip712`,
 * src/custody/signed-payloads/eip712.ts): signing activities record it as their hash function.
 */
export class Migration20261129040001 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter type "hash_function" add value if not exists 'eip712';`);
  }

  override async down(): Promise<void> {
    // PostgreSQL cannot drop an enum value: the type is rebuilt without it (its activities go first).
    this.addSql(`delete from "signing_activities" where "hash_function" = 'eip712';`);
    this.addSql(`alter type "hash_function" rename to "hash_function_old";`);
    this.addSql(`create type "hash_function" as enum ('no_op', 'sha256', 'keccak256', 'not_applicable');`);
    this.addSql(`alter table "signing_activities" alter column "hash_function" type "hash_function" using ("hash_function"::text::"hash_function");`);
    this.addSql(`drop type "hash_function_old";`);
  }

}
