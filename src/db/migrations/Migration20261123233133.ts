import { Migration } from '@mikro-orm/migrations';

export class Migration20261123233133 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "webhook_endpoints" add column "consecutive_failures" int not null default 0, add column "failing_since" timestamptz null, add column "probe_delivery_id" text null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "webhook_endpoints" drop column "consecutive_failures", drop column "failing_since", drop column "probe_delivery_id";`);
  }

}
