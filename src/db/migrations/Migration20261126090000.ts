import { Migration } from '@mikro-orm/migrations';

/**
 * Fee bumping (issue 31, part 5): the same-nonce replacements of a broadcast send (speed-up, cancel,
 * automatic bump), each a candidate the send's workflow follows, with the extra fee it locked; and
 * the height from which a send's automatic bump counts blocks.
 */
export class Migration20261126090000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create type "transaction_replacement_kind" as enum ('speed_up', 'cancel');`);
    this.addSql(`create type "transaction_replacement_origin" as enum ('api', 'automatic');`);
    this.addSql(`create type "transaction_replacement_status" as enum ('requested', 'broadcast', 'mined', 'refused', 'superseded');`);
    this.addSql(`create table "transaction_replacements" ("id" uuid not null, "organization_id" uuid not null, "environment" "environment" not null, "transaction_id" uuid not null, "kind" "transaction_replacement_kind" not null, "origin" "transaction_replacement_origin" not null, "status" "transaction_replacement_status" not null default 'requested', "recipient_amount" numeric(78,0) not null, "fee_terms" jsonb not null, "fee_limit" numeric(78,0) not null, "locked_fee" numeric(78,0) not null, "signed_transaction" text null, "tx_hash" text null, "policy_decision" jsonb not null, "api_key_id" text not null, "failure_message" text null, "created_at" timestamptz not null, "updated_at" timestamptz not null, "broadcast_at" timestamptz null, constraint "transaction_replacements_pkey" primary key ("id"));`);
    this.addSql(`create index "transaction_replacements_transaction_id_created_at_index" on "transaction_replacements" ("transaction_id", "created_at");`);

    this.addSql(`alter table "transaction_replacements" add constraint "transaction_replacements_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "transaction_replacements" add constraint "transaction_replacements_transaction_id_foreign" foreign key ("transaction_id") references "transactions" ("id") on update cascade on delete cascade;`);

    this.addSql(`alter table "transactions" add column "waiting_since_height" bigint null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "transaction_replacements" cascade;`);

    this.addSql(`alter table "transactions" drop column "waiting_since_height";`);

    this.addSql(`drop type "transaction_replacement_kind";`);
    this.addSql(`drop type "transaction_replacement_origin";`);
    this.addSql(`drop type "transaction_replacement_status";`);
  }
}
