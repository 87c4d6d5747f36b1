import { Migration } from '@mikro-orm/migrations';

/**
 * Ledger drifts (issue 31, part 3): what the ledger reconciliation finds where the custody ledger and
 * a chain's node disagree, suspected at first sight, open (or credited as an unattributed deposit)
 * when the next pass finds the same figures, resolved when they agree again.
 */
export class Migration20261126074635 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create type "ledger_drift_status" as enum ('suspected', 'open', 'credited', 'resolved');`);
    this.addSql(`create table "ledger_drifts" ("id" text not null, "organization_id" uuid not null, "environment" "environment" not null, "chain" text not null, "wallet_id" uuid not null, "address_id" uuid null, "asset_id" text not null, "ledger_amount" numeric(78,0) not null, "chain_amount" numeric(78,0) not null, "status" "ledger_drift_status" not null, "first_seen_at" timestamptz not null, "last_seen_at" timestamptz not null, "resolved_at" timestamptz null, constraint "ledger_drifts_pkey" primary key ("id"));`);
    this.addSql(`create index "ledger_drifts_wallet_id_asset_id_status_index" on "ledger_drifts" ("wallet_id", "asset_id", "status");`);
    this.addSql(`create index "ledger_drifts_chain_environment_status_index" on "ledger_drifts" ("chain", "environment", "status");`);

    this.addSql(`alter table "ledger_drifts" add constraint "ledger_drifts_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "ledger_drifts" add constraint "ledger_drifts_wallet_id_foreign" foreign key ("wallet_id") references "wallets" ("id") on update cascade on delete cascade;`);
    this.addSql(`alter table "ledger_drifts" add constraint "ledger_drifts_address_id_foreign" foreign key ("address_id") references "addresses" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "ledger_drifts" cascade;`);
    this.addSql(`drop type "ledger_drift_status";`);
  }
}
