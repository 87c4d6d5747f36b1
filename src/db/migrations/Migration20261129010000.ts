import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 47, item 1: loosening a control is a governed change. Every governance change is a row of
 * `governance_changes` (the governance log); a loosening one waits on an approval request whose
 * subject is that row, so a request now has one of four subjects.
 */
export class Migration20261129010000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create type "governance_change_kind" as enum ('policy_activated', 'policy_archived', 'gas_station_limits_raised', 'gas_station_limits_lowered', 'approvals_lowered', 'approvals_raised', 'cooling_shortened', 'cooling_lengthened', 'approver_added');`,
    );
    this.addSql(`create type "governance_actor_type" as enum ('user', 'apikey', 'operator');`);
    this.addSql(`create type "governance_change_status" as enum ('pending', 'applied', 'rejected', 'expired');`);
    this.addSql(
      `create table "governance_changes" ("id" text not null, "organization_id" uuid not null, "environment" "environment" null, "kind" "governance_change_kind" not null, "subject" jsonb not null, "change" jsonb not null, "requested_by_type" "governance_actor_type" not null, "requested_by_id" text not null, "requested_by_name" text not null, "requested_by_key_id" text null, "approval_request_id" text null, "status" "governance_change_status" not null, "applied_at" timestamptz null, "created_at" timestamptz not null, constraint "governance_changes_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "governance_changes_organization_id_created_at_id_index" on "governance_changes" ("organization_id", "created_at", "id");`);
    this.addSql(`create index "governance_changes_approval_request_id_index" on "governance_changes" ("approval_request_id");`);
    this.addSql(
      `alter table "governance_changes" add constraint "governance_changes_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`,
    );

    this.addSql(`alter table "policy_approval_requests" drop constraint policy_approval_requests_subject_check;`);
    this.addSql(`alter table "policy_approval_requests" add column "governance_change_id" text null;`);
    this.addSql(
      `alter table "policy_approval_requests" add constraint "policy_approval_requests_governance_change_id_foreign" foreign key ("governance_change_id") references "governance_changes" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "policy_approval_requests" add constraint policy_approval_requests_subject_check check(num_nonnulls(policy_id, address_book_entry_id, transaction_digest, governance_change_id) = 1);`,
    );
  }

  override async down(): Promise<void> {
    // Change requests have no subject the old check allows: they go first, with the log.
    this.addSql(`delete from "policy_approval_requests" where "governance_change_id" is not null;`);
    this.addSql(`alter table "policy_approval_requests" drop constraint policy_approval_requests_subject_check;`);
    this.addSql(`alter table "policy_approval_requests" drop constraint "policy_approval_requests_governance_change_id_foreign";`);
    this.addSql(`alter table "policy_approval_requests" drop column "governance_change_id";`);
    this.addSql(`alter table "policy_approval_requests" add constraint policy_approval_requests_subject_check check(num_nonnulls(policy_id, address_book_entry_id, transaction_digest) = 1);`);
    this.addSql(`drop table if exists "governance_changes" cascade;`);
    this.addSql(`drop type "governance_change_status";`);
    this.addSql(`drop type "governance_actor_type";`);
    this.addSql(`drop type "governance_change_kind";`);
  }
}
