import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 49, the API cannot reach a seed: seed_public_keys holds the public side of hardened nodes of
 * each seed (an account's extended public key, a Solana address's public key), stored by the signer
 * that derived it, so the API derives addresses without opening the seed. Empty at first: existing
 * wallets' accounts are stored by the signer on their next address (no migration needs the seed).
 */
export class Migration20261130003001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table "seed_public_keys" ("id" text not null, "seed_id" text not null, "path" text not null, "public_key" text not null, "created_at" timestamptz not null, constraint "seed_public_keys_pkey" primary key ("id"));`);
    this.addSql(`alter table "seed_public_keys" add constraint "seed_public_keys_seed_id_path_unique" unique ("seed_id", "path");`);
    this.addSql(`alter table "seed_public_keys" add constraint "seed_public_keys_seed_id_foreign" foreign key ("seed_id") references "organization_seeds" ("id") on update cascade on delete cascade;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "seed_public_keys" cascade;`);
  }
}
