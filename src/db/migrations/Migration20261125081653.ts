import { Migration } from '@mikro-orm/migrations';

/**
 * The hot path of authentication: a rate bucket hands out tokens in batches (`taken`, replacing
 * `allowed`), and every change of an API key but its last use notifies `api_key_changes` with the
 * key's id in the changing transaction, so each API process's key cache (src/api-keys/key-cache.ts)
 * evicts the key when the change commits, whichever process or tool made it.
 */
export class Migration20261125081653 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "api_key_rate_buckets" drop column "allowed";`);
    this.addSql(`alter table "api_key_rate_buckets" add column "taken" int not null default 0;`);
    this.addSql(`alter table "api_key_rate_buckets" alter column "taken" drop default;`);

    // A last-use stamp (written at most once a minute per key) changes nothing authentication reads.
    this.addSql(`create function notify_api_key_change() returns trigger language plpgsql as $$
      begin
        if tg_op = 'DELETE' then
          perform pg_notify('api_key_changes', old.id);
        elsif (to_jsonb(old) - 'last_used_at') is distinct from (to_jsonb(new) - 'last_used_at') then
          perform pg_notify('api_key_changes', new.id);
        end if;
        return null;
      end $$;`);
    this.addSql(`create trigger api_key_changes after update or delete on api_keys for each row execute function notify_api_key_change();`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger if exists api_key_changes on api_keys;`);
    this.addSql(`drop function if exists notify_api_key_change();`);
    this.addSql(`alter table "api_key_rate_buckets" drop column "taken";`);
    this.addSql(`alter table "api_key_rate_buckets" add column "allowed" bool not null default true;`);
  }
}
