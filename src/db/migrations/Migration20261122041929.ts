import { Migration } from '@mikro-orm/migrations';

export class Migration20261122041929 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "idempotency_status" as enum ('in_flight', 'completed');`);
    this.addSql(`create type "org_role" as enum ('owner', 'admin', 'approver', 'viewer');`);
    this.addSql(`create type "environment" as enum ('sandbox', 'live');`);
    this.addSql(`create table "idempotency_records" ("id" text not null, "organization_id" uuid not null, "key" text not null, "request_hash" text not null, "method" text not null, "path" text not null, "status" "idempotency_status" not null, "response_status" int null, "response_body" jsonb null, "locked_at" timestamptz not null, "created_at" timestamptz not null, constraint "idempotency_records_pkey" primary key ("id"));`);
    this.addSql(`create index "idempotency_records_created_at_index" on "idempotency_records" ("created_at");`);
    this.addSql(`alter table "idempotency_records" add constraint "idempotency_records_organization_id_key_unique" unique ("organization_id", "key");`);

    this.addSql(`create table "organizations" ("id" uuid not null, "name" text not null, "created_at" timestamptz not null, constraint "organizations_pkey" primary key ("id"));`);

    this.addSql(`create table "members" ("id" uuid not null, "organization_id" uuid not null, "name" text not null, "email" text not null, "org_role" "org_role" not null, "created_at" timestamptz not null, constraint "members_pkey" primary key ("id"));`);
    this.addSql(`create index "members_organization_id_created_at_id_index" on "members" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "members" add constraint "members_organization_id_email_unique" unique ("organization_id", "email");`);

    this.addSql(`create table "api_keys" ("id" text not null, "organization_id" uuid not null, "member_id" uuid null, "name" text not null, "environment" "environment" not null, "scopes" text[] not null, "api_version" text not null, "secret_hash" text not null, "secret_last_four" text not null, "created_at" timestamptz not null, "last_used_at" timestamptz null, "revoked_at" timestamptz null, constraint "api_keys_pkey" primary key ("id"));`);
    this.addSql(`alter table "api_keys" add constraint "api_keys_secret_hash_unique" unique ("secret_hash");`);
    this.addSql(`create index "api_keys_organization_id_created_at_id_index" on "api_keys" ("organization_id", "created_at", "id");`);

    this.addSql(`create table "roles" ("id" text not null, "organization_id" uuid not null, "name" text not null, "description" text not null default '', "built_in" boolean not null default false, "created_at" timestamptz not null, constraint "roles_pkey" primary key ("id"));`);
    this.addSql(`alter table "roles" add constraint "roles_organization_id_name_unique" unique ("organization_id", "name");`);

    this.addSql(`create table "member_roles" ("member_id" uuid not null, "role_id" text not null, constraint "member_roles_pkey" primary key ("member_id", "role_id"));`);

    this.addSql(`alter table "members" add constraint "members_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "api_keys" add constraint "api_keys_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "api_keys" add constraint "api_keys_member_id_foreign" foreign key ("member_id") references "members" ("id") on update cascade on delete set null;`);

    this.addSql(`alter table "roles" add constraint "roles_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "member_roles" add constraint "member_roles_member_id_foreign" foreign key ("member_id") references "members" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "member_roles" add constraint "member_roles_role_id_foreign" foreign key ("role_id") references "roles" ("id") on update cascade on delete cascade;`);
  }

}
