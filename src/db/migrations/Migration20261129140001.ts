import { Migration } from '@mikro-orm/migrations';

/**
 * Reorganisations and suspense (issue 48, part 3): an outgoing transfer a reorganisation took off the
 * chain loses its block until it is seen again (each time counted, for its ledger references), and a
 * drift can say an available balance went below zero (`overdrawn`: a reversed deposit already spent).
 */
export class Migration20261129140001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter type "ledger_drift_figure" add value if not exists 'overdrawn';`);
    this.addSql(`alter table "outgoing_transfers" alter column "block_height" drop not null, alter column "block_hash" drop not null;`);
    this.addSql(`alter table "outgoing_transfers" add column "reorganisations" int not null default 0;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "outgoing_transfers" drop column "reorganisations";`);
    this.addSql(`delete from "outgoing_transfers" where "block_height" is null;`);
    this.addSql(`alter table "outgoing_transfers" alter column "block_height" set not null, alter column "block_hash" set not null;`);
    this.addSql(`update "ledger_drifts" set "figure" = 'balance' where "figure" = 'overdrawn';`);
  }
}
