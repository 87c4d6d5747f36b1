import { Migration } from '@mikro-orm/migrations';

/**
 * One person, one vote; automations follow their owner (issue 47, items 2 and 6).
 * - A key minted through the API for another member waits for that member's confirmation
 *   (`pending_confirmation`, then `confirmed_at` / `confirmed_by_key_id`).
 * - A vote records the key it was cast with, so later votes are traced against its lineage.
 * - Keys minted through the API acting for nobody now act for the nearest member above them in
 *   their minting chain (a key minted by a key acting for nobody, up to the operator's, stays unbound).
 * - Gas stations and consolidation rules pause when their owner key is revoked
 *   (`automation_paused_at`); those whose key was revoked already are paused now.
 */
export class Migration20261129020001 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "api_keys" add column "pending_confirmation" boolean not null default false, add column "confirmed_at" timestamptz null, add column "confirmed_by_key_id" text null;`);
    this.addSql(`alter table "policy_approval_votes" add column "api_key_id" text null;`);
    this.addSql(`alter table "gas_stations" add column "automation_paused_at" timestamptz null;`);
    this.addSql(`alter table "consolidation_rules" add column "automation_paused_at" timestamptz null;`);
    this.addSql(`
      update "api_keys" k set "member_id" = bound."member_id" from (
        with recursive up ("key_id", "next_key_id", "member_id", "depth") as (
          select k."id", k."created_by_key_id", k."created_by_member_id", 0 from "api_keys" k
           where k."member_id" is null and k."created_by_key_id" is not null
          union all
          select up."key_id", m."created_by_key_id", coalesce(m."member_id", m."created_by_member_id"), up."depth" + 1
            from up join "api_keys" m on m."id" = up."next_key_id"
           where up."member_id" is null and up."depth" < 64
        )
        select distinct on ("key_id") "key_id", "member_id" from up where "member_id" is not null order by "key_id", "depth"
      ) bound where k."id" = bound."key_id";`);
    this.addSql(`update "gas_stations" s set "automation_paused_at" = k."revoked_at" from "api_keys" k where k."id" = s."created_by_key_id" and k."revoked_at" is not null;`);
    this.addSql(`update "consolidation_rules" r set "automation_paused_at" = k."revoked_at" from "api_keys" k where k."id" = r."created_by_key_id" and k."revoked_at" is not null and r."deleted_at" is null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "consolidation_rules" drop column "automation_paused_at";`);
    this.addSql(`alter table "gas_stations" drop column "automation_paused_at";`);
    this.addSql(`alter table "policy_approval_votes" drop column "api_key_id";`);
    this.addSql(`alter table "api_keys" drop column "pending_confirmation", drop column "confirmed_at", drop column "confirmed_by_key_id";`);
  }

}
