import { Migration } from '@mikro-orm/migrations';

/**
 * Every candidate of a send is followed (issue 48 part 2): the send keeps its own hash and bytes, and
 * `mined_tx_hash` names the candidate the chain mined. Sends already mined carry that candidate's hash
 * in `tx_hash` (a replacement's once one was mined): it is their mined candidate. A send failed and
 * then mined anyway (part 5) records when that was seen.
 */
export class Migration20261129110001 extends Migration {

  override async up(): Promise<void> {
    this.addSql(`alter table "transactions" add column "mined_tx_hash" text null, add column "mined_after_failure_at" timestamptz null;`);
    this.addSql(
      `update "transactions" set "mined_tx_hash" = "tx_hash" where "tx_hash" is not null and ("status" in ('confirming', 'confirmed') or ("status" = 'failed' and "failure_reason" in ('reverted', 'cancelled')));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "transactions" drop column "mined_tx_hash", drop column "mined_after_failure_at";`);
  }

}
