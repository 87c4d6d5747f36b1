import { Migration } from '@mikro-orm/migrations';

export class Migration20261123234821 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create table "api_key_rate_buckets" ("api_key_id" text not null, "tokens" double precision not null, "allowed" boolean not null, "updated_at" timestamptz not null, constraint "api_key_rate_buckets_pkey" primary key ("api_key_id"));`);

    this.addSql(`alter table "api_key_rate_buckets" add constraint "api_key_rate_buckets_api_key_id_foreign" foreign key ("api_key_id") references "api_keys" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "api_key_rate_buckets" cascade;`);
  }

}
