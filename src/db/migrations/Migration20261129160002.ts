import { Migration } from '@mikro-orm/migrations';

/**
 * Suspense resolved when the chain proves a transfer will never be mined again (issue 48, part 3): the
 * account that signed the transaction carrying a deposit or a spend and its nonce, where the proof was
 * first seen, and when it resolved the transfer.
 */
export class Migration20261129160002 extends Migration {
  override async up(): Promise<void> {
    for (const table of ['incoming_transfers', 'outgoing_transfers']) {
      this.addSql(
        `alter table "${table}" add column "payer" text null, add column "payer_nonce" numeric(78,0) null, add column "loss_seen_at_height" bigint null, add column "lost_at" timestamptz null;`,
      );
    }
  }

  override async down(): Promise<void> {
    for (const table of ['incoming_transfers', 'outgoing_transfers']) {
      this.addSql(`alter table "${table}" drop column "payer", drop column "payer_nonce", drop column "loss_seen_at_height", drop column "lost_at";`);
    }
  }
}
