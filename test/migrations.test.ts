import assert from 'node:assert/strict';
import { testOrm } from './support/environment';

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
