import { Migration } from '@mikro-orm/migrations';

/** Solana transfers remember the recent blockhash their transaction names: once expired at finality, a reversed one never comes back (issue 48, part 3). */
export class Migration20261130000001 extends Migration {
  override async up(): Promise<void> {
    for (const table of ['incoming_transfers', 'outgoing_transfers']) this.addSql(`alter table "${table}" add column "recent_blockhash" text null;`);
  }

  override async down(): Promise<void> {
    for (const table of ['incoming_transfers', 'outgoing_transfers']) this.addSql(`alter table "${table}" drop column "recent_blockhash";`);
  }
}
