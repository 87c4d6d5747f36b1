import { Migration } from '@mikro-orm/migrations';

/**
 * Bitcoin reconciled without an address index (issue 48, part 4): a drift can say a wallet's UTXO table
 * and the node disagree about the outputs the table counts as unspent (`utxo_set`).
 */
export class Migration20261129150001 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter type "ledger_drift_figure" add value if not exists 'utxo_set';`);
  }

  override async down(): Promise<void> {
    // PostgreSQL cannot drop an enum value; the drifts that used it read as balance drifts.
    this.addSql(`update "ledger_drifts" set "figure" = 'balance' where "figure" = 'utxo_set';`);
  }
}
