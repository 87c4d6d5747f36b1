import assert from 'node:assert/strict';
import { testOrm } from './support/environment';

describe('Database migrations', () => {
  it('are all applied and match the entities (migration:check)', async () => {
    const orm = await testOrm();
    const migrator = orm.getMigrator();
    assert.deepEqual(await migrator.getPendingMigrations(), []);
    assert.equal(await migrator.checkMigrationNeeded(), false, 'entities changed without a migration: run npm run migration:create');
  });
});
