import { Migration } from '@mikro-orm/migrations';

/**
 * A webhook delivery created while its endpoint's circuit is open is held: pending, with no
 * workflow started, until the circuit closes (its start is recorded then) or the endpoint is
 * disabled or deleted (it fails then). Existing rows all have a workflow: not held.
 */
export class Migration20261125120000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "event_deliveries" add column "held_by_circuit" boolean not null default false;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "event_deliveries" drop column "held_by_circuit";`);
  }
}
