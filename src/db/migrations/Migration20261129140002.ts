import { Migration } from '@mikro-orm/migrations';

/**
 * A settled send a reorganisation took off the chain, proven never to be mined again (issue 48, part
 * 3): the tip at which the proof was first seen, so it counts only once it has held for the send's
 * confirmation count of blocks. And the unexpected spends of an address, which every reconciliation
 * page reads (bench/results/2026-11-29T11-08-41-reconciliation.json: a page's queries scanned the table),
 * and settled sends by their block's height, which every scan pass compares with the blocks it scanned.
 */
export class Migration20261129140002 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "transactions" add column "loss_seen_at_height" bigint null;`);
    this.addSql(`create index "outgoing_transfers_unexpected_address_idx" on "outgoing_transfers" ("address_id") where unexpected;`);
    this.addSql(`create index "transactions_settled_block_idx" on "transactions" ("chain", "environment", "block_height") where block_hash is not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "transactions_settled_block_idx";`);
    this.addSql(`drop index "outgoing_transfers_unexpected_address_idx";`);
    this.addSql(`alter table "transactions" drop column "loss_seen_at_height";`);
  }
}
