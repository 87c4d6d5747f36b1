import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { databaseTls } from '../../src/db/connection';
import { ormConfig } from '../../src/db/mikro-orm.config';

describe('TLS to a managed PostgreSQL from the URL sslmode', () => {
  it('reads libpq sslmode and sslrootcert, which the ORM URL parsing would drop', async () => {
    assert.equal(databaseTls('postgresql://u:p@db.example:5432/custody'), false);
    assert.equal(databaseTls('postgresql://u:p@db.example:5432/custody?sslmode=disable'), false);
    assert.deepEqual(databaseTls('postgresql://u:p@db.example:5432/custody?sslmode=require'), { rejectUnauthorized: false });
    assert.deepEqual(databaseTls('postgresql://u:p@db.example:5432/custody?sslmode=verify-full'), { rejectUnauthorized: true });
    const dir = await mkdtemp(path.join(tmpdir(), 'pg-ca-'));
    await writeFile(path.join(dir, 'root.crt'), 'CA');
    const verifyCa = databaseTls(`postgresql://u:p@db.example:5432/custody?sslmode=verify-ca&sslrootcert=${path.join(dir, 'root.crt')}`);
    assert.ok(verifyCa);
    assert.equal(verifyCa.ca, 'CA');
    assert.equal(verifyCa.checkServerIdentity?.(), undefined, 'verify-ca checks the chain, not the host name');
    assert.deepEqual((ormConfig('postgresql://u:p@db.example:5432/custody?sslmode=require').driverOptions as { connection: { ssl: unknown } }).connection.ssl, { rejectUnauthorized: false });
  });

  it('refuses an sslmode it does not support at configuration time', () => {
    assert.throws(() => loadConfig({ DATABASE_URL: 'postgresql://u@db.example/custody?sslmode=prefer' }), /sslmode/);
    assert.equal(loadConfig({ DATABASE_URL: 'postgresql://u@db.example/custody?sslmode=verify-full' }).DATABASE_URL.endsWith('verify-full'), true);
  });
});
