import { Migration } from '@mikro-orm/migrations';

/**
 * Revoking an API key is a governance change that applies at once: the governance log records it
 * (kind `api_key_revoked`, src/policies/governance.ts).
 */
export class Migration20261129070001 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter type "governance_change_kind" add value if not exists 'api_key_revoked';`);
  }

  override async down(): Promise<void> {
    // PostgreSQL cannot drop an enum value: the type is rebuilt without it (its log rows go first).
    this.addSql(`delete from "governance_changes" where "kind" = 'api_key_revoked';`);
    this.addSql(`alter type "governance_change_kind" rename to "governance_change_kind_old";`);
    this.addSql(
      `create type "governance_change_kind" as enum ('policy_activated', 'policy_archived', 'gas_station_limits_raised', 'gas_station_limits_lowered', 'approvals_lowered', 'approvals_raised', 'cooling_shortened', 'cooling_lengthened', 'approver_added');`,
    );
    this.addSql(`alter table "governance_changes" alter column "kind" type "governance_change_kind" using ("kind"::text::"governance_change_kind");`);
    this.addSql(`drop type "governance_change_kind_old";`);
  }

}
