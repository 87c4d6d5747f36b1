import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 35, item 4: a send a `require_approval` rule holds opens an approval request bound to the
 * send as asked (its digest, the request approvers judge, the rule that held it and the members
 * its approvers stood for); once approved, the identical send consumes it. A request now has one
 * of three subjects. Item 3: approvers list an environment's requests, newest first.
 */
export class Migration20261126170357 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "policy_approval_requests" drop constraint policy_approval_requests_subject_check;`);
    this.addSql(
      `alter table "policy_approval_requests" add column "transaction_digest" text null, add column "transaction_request" jsonb null, add column "held_by_policy_id" text null, add column "held_by_rule_id" text null, add column "approver_member_ids" jsonb null, add column "consumed_at" timestamptz null, add column "consumed_by_transaction_id" text null;`,
    );
    this.addSql(`create index "policy_approval_requests_organization_id_environme_03632_index" on "policy_approval_requests" ("organization_id", "environment", "created_at", "id");`);
    this.addSql(`create index "policy_approval_requests_organization_id_environme_bd91d_index" on "policy_approval_requests" ("organization_id", "environment", "transaction_digest", "status");`);
    this.addSql(`alter table "policy_approval_requests" add constraint policy_approval_requests_subject_check check(num_nonnulls(policy_id, address_book_entry_id, transaction_digest) = 1);`);
  }

  override async down(): Promise<void> {
    // Held sends' requests have no subject the old check allows: they go first.
    this.addSql(`delete from "policy_approval_requests" where "transaction_digest" is not null;`);
    this.addSql(`drop index "policy_approval_requests_organization_id_environme_03632_index";`);
    this.addSql(`drop index "policy_approval_requests_organization_id_environme_bd91d_index";`);
    this.addSql(`alter table "policy_approval_requests" drop constraint policy_approval_requests_subject_check;`);
    this.addSql(
      `alter table "policy_approval_requests" drop column "transaction_digest", drop column "transaction_request", drop column "held_by_policy_id", drop column "held_by_rule_id", drop column "approver_member_ids", drop column "consumed_at", drop column "consumed_by_transaction_id";`,
    );
    this.addSql(`alter table "policy_approval_requests" add constraint policy_approval_requests_subject_check check((policy_id IS NULL) <> (address_book_entry_id IS NULL));`);
  }
}
