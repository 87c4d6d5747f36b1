import assert from 'node:assert/strict';
import { testOrm } from './support/environment';
import { Migration20261126104200 } from '../src/db/migrations/Migration20261126104200';

describe('Database migrations', () => {
  it('are all applied, and the migrated schema and the snapshot both match the entities (migration:check)', async () => {
    const orm = await testOrm();
    const migrator = orm.getMigrator();
    assert.deepEqual(await migrator.getPendingMigrations(), []);
    const drift = await orm.schema.getUpdateSchemaSQL({ wrap: false, safe: false, dropTables: true });
    assert.equal(drift.trim(), '', `the migrated database differs from the entities:\n${drift}`);
    assert.equal(await migrator.checkMigrationNeeded(), false, 'the migration snapshot is stale: run npm run migration:create');
  });
});

describe('Migration20261126104200: consolidation triggers counted', () => {
  it('turns each run\'s recorded_triggers array into its count and its last trigger, and back', async () => {
    const em = (await testOrm()).em.fork();
    const migration = new Migration20261126104200(em.getDriver(), em.config);
    const statements = async (direction: 'up' | 'down') => {
      migration.reset();
      await migration[direction]();
      return migration.getQueries().map((query) => (typeof query === 'string' ? query : query.toString()));
    };
    const up = await statements('up');
    const down = await statements('down');
    const tx = em.fork();
    await tx.begin();
    try {
      // The statements run on a scratch table of the same name, gone with the rollback.
      await tx.execute('create schema migration_scratch');
      await tx.execute('set local search_path to migration_scratch');
      await tx.execute('create table consolidation_runs (id int primary key, recorded_triggers jsonb null)');
      await tx.execute(
        `insert into consolidation_runs values (1, null), (2, '[]'), (3, '[{"source":"manual","at":"2026-11-01T00:00:00.000Z","detail":"key"},{"source":"threshold","at":"2026-11-01T00:01:00.000Z","detail":"deposit"}]')`,
      );
      for (const statement of up) await tx.execute(statement);
      const counted = await tx.execute<{ id: number; recorded_trigger_count: number; last_recorded_trigger: unknown }[]>('select * from consolidation_runs order by id');
      assert.deepEqual(counted, [
        { id: 1, recorded_trigger_count: 0, last_recorded_trigger: null },
        { id: 2, recorded_trigger_count: 0, last_recorded_trigger: null },
        { id: 3, recorded_trigger_count: 2, last_recorded_trigger: { source: 'threshold', at: '2026-11-01T00:01:00.000Z', detail: 'deposit' } },
      ]);
      for (const statement of down) await tx.execute(statement);
      const listed = await tx.execute<{ id: number; recorded_triggers: unknown }[]>('select id, recorded_triggers from consolidation_runs order by id');
      assert.deepEqual(listed[2], { id: 3, recorded_triggers: [{ source: 'threshold', at: '2026-11-01T00:01:00.000Z', detail: 'deposit' }] });
    } finally {
      await tx.rollback();
    }
  });
});
