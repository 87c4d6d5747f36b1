import { Migration } from '@mikro-orm/migrations';

/** Bitcoin deposits remember the outputs their transaction spends: another spend of one proves a reversed deposit never comes back (issue 48, part 3). */
export class Migration20261129160004 extends Migration {
  override async up(): Promise<void> {
    for (const table of ['incoming_transfers', 'outgoing_transfers']) this.addSql(`alter table "${table}" add column "spends" jsonb null;`);
  }

  override async down(): Promise<void> {
    for (const table of ['incoming_transfers', 'outgoing_transfers']) this.addSql(`alter table "${table}" drop column "spends";`);
  }
}
