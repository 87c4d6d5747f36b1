import { Migration } from '@mikro-orm/migrations';

/**
 * New payees wait (issue 30, part 4): an address-book entry counts for whitelists and consolidation
 * from usable_at, created_at plus the organization's cooling period for its environment (24 h live,
 * 0 sandbox by default), or earlier once an approval request passes. Entries made before this
 * rule are usable as they were. Approval requests gain a second subject, the address-book entry,
 * exactly one of the two set.
 */
export class Migration20261126051555 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "organizations" add column "address_book_cooling_hours_live" int not null default 24, add column "address_book_cooling_hours_sandbox" int not null default 0;`);

    this.addSql(`alter table "address_book_entries" add column "usable_at" timestamptz null;`);
    this.addSql(`update "address_book_entries" set "usable_at" = "created_at";`);
    this.addSql(`alter table "address_book_entries" alter column "usable_at" set not null;`);

    this.addSql(`alter table "policy_approval_requests" add column "address_book_entry_id" uuid null;`);
    this.addSql(`alter table "policy_approval_requests" alter column "policy_id" drop not null;`);
    this.addSql(`alter table "policy_approval_requests" add constraint "policy_approval_requests_address_book_entry_id_foreign" foreign key ("address_book_entry_id") references "address_book_entries" ("id") on update cascade on delete cascade;`);
    this.addSql(`create index "policy_approval_requests_address_book_entry_id_status_index" on "policy_approval_requests" ("address_book_entry_id", "status");`);
    this.addSql(`alter table "policy_approval_requests" add constraint "policy_approval_requests_subject_check" check ((policy_id is null) <> (address_book_entry_id is null));`);
  }

  override async down(): Promise<void> {
    this.addSql(`delete from "policy_approval_requests" where "policy_id" is null;`);
    this.addSql(`alter table "policy_approval_requests" drop constraint "policy_approval_requests_subject_check";`);
    this.addSql(`drop index "policy_approval_requests_address_book_entry_id_status_index";`);
    this.addSql(`alter table "policy_approval_requests" drop constraint "policy_approval_requests_address_book_entry_id_foreign";`);
    this.addSql(`alter table "policy_approval_requests" drop column "address_book_entry_id";`);
    this.addSql(`alter table "policy_approval_requests" alter column "policy_id" set not null;`);
    this.addSql(`alter table "address_book_entries" drop column "usable_at";`);
    this.addSql(`alter table "organizations" drop column "address_book_cooling_hours_live", drop column "address_book_cooling_hours_sandbox";`);
  }
}
