import { Migration } from '@mikro-orm/migrations';

/**
 * Payout beneficiaries sealed and masked (issue 32, item 6): the trip's sealed beneficiary beside
 * its masked copy, and the phone numbers that stored payout events (webhook payloads) carried in
 * clear masked to their last four (bank account numbers were already masked there). Trips stored
 * before are sealed by `cli migrate` after the migrations: sealing needs the KeyProvider.
 */
export class Migration20261126104100 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "payout_trips" add column "beneficiary_sealed" text null;`);

    this.addSql(
      `update "events" set "data" = jsonb_set("data", '{beneficiary,phoneNumber}', to_jsonb(repeat('*', greatest(length("data"#>>'{beneficiary,phoneNumber}') - 4, 0)) || right("data"#>>'{beneficiary,phoneNumber}', 4)))
       where "data"#>>'{beneficiary,phoneNumber}' not like '*%';`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "payout_trips" drop column "beneficiary_sealed";`);
  }
}
