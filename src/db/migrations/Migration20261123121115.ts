import { Migration } from '@mikro-orm/migrations';

export class Migration20261123121115 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "cards" add column "termination_requested_at" timestamptz null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "cards" drop column "termination_requested_at";`);
  }

}
