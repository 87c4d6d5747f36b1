import { Migration } from '@mikro-orm/migrations';

export class Migration20261122052319 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`create type "lightning_direction" as enum ('incoming', 'outgoing');`);
    this.addSql(`create type "lightning_status" as enum ('pending', 'paid', 'expired', 'failed');`);
    this.addSql(`create table "lightning_node_keys" ("id" text not null, "environment" "environment" not null, "public_key" text not null, "key_provider" text not null, "master_key_id" text not null, "wrapped_data_key" text not null, "private_key_ciphertext" text not null, "created_at" timestamptz not null, constraint "lightning_node_keys_pkey" primary key ("id"));`);
    this.addSql(`alter table "lightning_node_keys" add constraint "lightning_node_keys_environment_unique" unique ("environment");`);

    this.addSql(`create table "lightning_invoices" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "direction" "lightning_direction" not null, "status" "lightning_status" not null default 'pending', "reference" text not null, "customer_id" uuid null, "payment_hash" text not null, "request" text not null, "destination" text not null, "preimage" text not null default '', "amount_msat" numeric(20,0) not null, "fee_msat" numeric(20,0) not null default 0, "fee_limit_msat" numeric(20,0) null, "description" text not null, "expires_at" timestamptz not null, "sent_at" timestamptz null, "failure_reason" text null, "paid_by_payment_id" uuid null, "created_at" timestamptz not null, "updated_at" timestamptz null, constraint "lightning_invoices_pkey" primary key ("id"));`);
    this.addSql(`create index "lightning_invoices_payment_hash_index" on "lightning_invoices" ("payment_hash");`);
    this.addSql(`create index "lightning_invoices_organization_id_created_at_id_index" on "lightning_invoices" ("organization_id", "created_at", "id");`);
    this.addSql(`alter table "lightning_invoices" add constraint "lightning_invoices_organization_id_direction_reference_unique" unique ("organization_id", "direction", "reference");`);

    this.addSql(`alter table "lightning_invoices" add constraint "lightning_invoices_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "lightning_node_keys" cascade;`);

    this.addSql(`drop table if exists "lightning_invoices" cascade;`);

    this.addSql(`drop type "lightning_direction";`);
    this.addSql(`drop type "lightning_status";`);
  }

}
