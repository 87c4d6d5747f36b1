import { Migration } from '@mikro-orm/migrations';

export class Migration20261123120740 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "idempotency_records" add column "claim_token" uuid null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "idempotency_records" drop column "claim_token";`);
  }

}
