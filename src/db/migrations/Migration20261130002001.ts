import { Migration } from '@mikro-orm/migrations';

/**
 * One live seed per organization whose live wallets already derive from its seed: a copy of the
 * (now sandbox) seed row, sealed as it was (envelope v1, whose contexts name the organization only),
 * marked as sharing the sandbox mnemonic. Run again, it copies nothing: the live row exists.
 */
export const SHARED_LIVE_SEEDS_SQL = `insert into organization_seeds (id, organization_id, environment, shares_sandbox_mnemonic, envelope_version, key_provider, master_key_id, wrapped_data_key, mnemonic_ciphertext, created_at)
  select s.id || '_live', s.organization_id, 'live', true, s.envelope_version, s.key_provider, s.master_key_id, s.wrapped_data_key, s.mnemonic_ciphertext, s.created_at
    from organization_seeds s
   where s.environment = 'sandbox'
     and exists (select 1 from wallets w where w.organization_id = s.organization_id and w.environment = 'live')
  on conflict (organization_id, environment) do nothing`;

/**
 * Issue 49, one seed per environment: organization_seeds gets its environment, unique per
 * organization and environment. Every existing seed becomes its organization's sandbox seed; an
 * organization with live wallets keeps signing for them with a live copy (SHARED_LIVE_SEEDS_SQL),
 * and one without gets a fresh live seed on first live use (src/keys/service.ts ensureSeed).
 */
export class Migration20261130002001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "organization_seeds" add column "environment" "environment" not null default 'sandbox', add column "shares_sandbox_mnemonic" boolean not null default false;`);
    this.addSql(`alter table "organization_seeds" alter column "environment" drop default;`);
    this.addSql(`alter table "organization_seeds" drop constraint "organization_seeds_organization_id_unique";`);
    this.addSql(`alter table "organization_seeds" add constraint "organization_seeds_organization_id_environment_unique" unique ("organization_id", "environment");`);
    this.addSql(SHARED_LIVE_SEEDS_SQL);
  }

  override async down(): Promise<void> {
    // Only the copies go: an organization with a live seed of its own makes the unique constraint
    // fail, so no live key is ever dropped by going back.
    this.addSql(`delete from "organization_seeds" where "shares_sandbox_mnemonic";`);
    this.addSql(`alter table "organization_seeds" drop constraint "organization_seeds_organization_id_environment_unique";`);
    this.addSql(`alter table "organization_seeds" add constraint "organization_seeds_organization_id_unique" unique ("organization_id");`);
    this.addSql(`alter table "organization_seeds" drop column "environment", drop column "shares_sandbox_mnemonic";`);
  }
}
