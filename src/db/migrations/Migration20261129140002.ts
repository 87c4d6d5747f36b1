import { Migration } from '@mikro-orm/migrations';

/**
 * A settled send a reorganisation took off the chain, proven never to be mined again (issue 48, part
 * 3): the tip at which the proof was first seen, so it counts only once it has held for the send's
 * confirmation count of blocks.
 */
export class Migration20261129140002 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "transactions" add column "loss_seen_at_height" bigint null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "transactions" drop column "loss_seen_at_height";`);
  }
}
