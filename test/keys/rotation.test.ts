import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { openText, sealText } from '../../src/keys/envelope';
import { DEVELOPMENT_MASTER_KEY } from '../../src/keys/master-key';
import { KeyRing, LocalKeyProvider, type KeyProvider } from '../../src/keys/provider';
import { envelopeColumn, rotateSealedColumns } from '../../src/keys/rotation';
import { testOrm } from '../support/environment';

/** The rotation's walk over one sealed column of a table of its own: batches, a crash in the middle, a second run. */
describe('keys:rotate walks a sealed column in batches, resumably', () => {
  const table = `rotation_probe_${process.pid}`;
  const context = (id: string) => `custody-platform/rotation-probe/${id}`;
  const column = envelopeColumn(table, 'sealed', [], (row) => context(row.id));
  const oldKey = new LocalKeyProvider(randomBytes(32));
  const newKey = new LocalKeyProvider(randomBytes(32));

  before(async () => {
    const em = (await testOrm()).em.fork();
    await em.execute(`create table ${table} (id text primary key, sealed text)`);
    for (let index = 0; index < 23; index++) {
      const id = `row-${String(index).padStart(2, '0')}`;
      await em.execute(`insert into ${table} (id, sealed) values (?, ?)`, [id, await sealText(oldKey, `secret ${id}`, context(id))]);
    }
    // Rows with nothing sealed are not the rotation's.
    await em.execute(`insert into ${table} (id, sealed) values ('clear', 'whsec_in_clear'), ('empty', null)`);
  });
  after(async () => (await testOrm()).em.fork().execute(`drop table if exists ${table}`));

  const rows = async () => (await testOrm()).em.fork().execute<{ id: string; sealed: string }[]>(`select id, sealed from ${table} where id like 'row-%' order by id`);

  it('a run that dies mid-way keeps the batches it finished and loses nothing; the next run finishes, and a third finds nothing to do', async () => {
    const ring = new KeyRing(newKey, [oldKey]);
    let wraps = 0;
    const dying: KeyProvider = {
      name: ring.name,
      masterKeyId: ring.masterKeyId,
      development: false,
      decryptDataKey: (wrapped, dataContext) => ring.decryptDataKey(wrapped, dataContext),
      encryptDataKey: async (dataKey, dataContext) => {
        if (++wraps === 13) throw new Error('the process died');
        return ring.encryptDataKey(dataKey, dataContext);
      },
    };
    const em = (await testOrm()).em.fork();
    const counted = await rotateSealedColumns(em, ring, [column], { dryRun: true });
    assert.deepEqual(counted, [{ table, column: `${table}.sealed`, rewrapped: 0, left: { [oldKey.masterKeyId]: 23 } }], 'a dry run counts, per master key');

    const before = await rows();
    await assert.rejects(rotateSealedColumns(em, dying, [column], { batchSize: 5 }), /the process died/);
    const midway = await rows();
    assert.equal(midway.filter((row) => JSON.parse(row.sealed).k === newKey.masterKeyId).length, 10, 'the two batches before the crash are kept, the third rolled back');
    midway.forEach((row, index) => assert.equal(JSON.parse(row.sealed).c, JSON.parse(before[index]!.sealed).c, 'the ciphertext under the data key is never rewritten'));
    for (const row of midway) assert.equal(await openText(ring, row.sealed, context(row.id)), `secret ${row.id}`);

    const finished = await rotateSealedColumns(em, ring, [column], { batchSize: 5 });
    assert.deepEqual(finished, [{ table, column: `${table}.sealed`, rewrapped: 13, left: {} }]);
    for (const row of await rows()) assert.equal(await openText(newKey, row.sealed, context(row.id)), `secret ${row.id}`, 'opens under the new key alone');
    assert.deepEqual(await rotateSealedColumns(em, ring, [column]), [{ table, column: `${table}.sealed`, rewrapped: 0, left: {} }]);
  });

  it('never moves rows to the public development key', async () => {
    const em = (await testOrm()).em.fork();
    const development = new KeyRing(new LocalKeyProvider(DEVELOPMENT_MASTER_KEY), [newKey]);
    await assert.rejects(rotateSealedColumns(em, development, [column]), /public development key: set MASTER_KEY or KEY_PROVIDER=pkcs11/);
    assert.equal((await rotateSealedColumns(em, development, [column], { dryRun: true }))[0]!.left[newKey.masterKeyId], 23, 'it still counts');
  });

  it('stops at a row whose master key is not configured, naming the key, with nothing of that batch changed', async () => {
    const stranger = new LocalKeyProvider(randomBytes(32));
    const em = (await testOrm()).em.fork();
    const id = `row-x-${randomUUID()}`;
    await em.execute(`insert into ${table} (id, sealed) values (?, ?)`, [id, await sealText(stranger, 'secret', context(id))]);
    const third = new LocalKeyProvider(randomBytes(32));
    await assert.rejects(rotateSealedColumns(em, new KeyRing(third, [newKey]), [column]), new RegExp(`wrapped under ${stranger.masterKeyId}, which is neither`));
    assert.ok((await rows()).every((row) => JSON.parse(row.sealed).k !== third.masterKeyId), 'the batch rolled back');
  });
});
