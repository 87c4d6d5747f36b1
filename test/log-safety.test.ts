import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger, safeError } from '../src/logger';
import { testOrm } from './support/environment';

/** A failed statement must not carry its bound values into a log line or a workflow history. */
describe('Database errors in logs and activity failures', () => {
  const secret = `whsec_${Buffer.from('never-in-a-log-line-0123456789').toString('base64')}`;

  // A table of its own, dropped afterwards (a temporary table would live on one pooled connection only).
  const table = `log_probe_${process.pid}`;
  after(async () => {
    await (await testOrm()).em.fork().getConnection().execute(`drop table if exists ${table}`);
  });

  async function uniqueViolationCarrying(value: string): Promise<unknown> {
    const connection = (await testOrm()).em.fork().getConnection();
    await connection.execute(`create table if not exists ${table} (secret text primary key)`);
    await connection.execute(`insert into ${table} values (?) on conflict do nothing`, [value]);
    return connection.execute(`insert into ${table} values (?)`, [value]).then(
      () => assert.fail('the duplicate insert succeeded'),
      (error: unknown) => error,
    );
  }

  it('logs the SQLSTATE and constraint of a failed insert, never its statement, values, detail or stack', async () => {
    const error = await uniqueViolationCarrying(secret);
    assert.match(String((error as Error).message), /whsec_/, 'the driver error itself does carry the value');
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    createLogger('info', 'test', sink).error({ err: error }, 'unhandled error');
    const line = lines.join('');
    assert.ok(!line.includes('whsec_'), line);
    assert.ok(!/insert into/i.test(line), line);
    assert.ok(!line.includes('already exists'), 'no detail');
    const logged = JSON.parse(line).err;
    assert.equal(logged.code, '23505');
    assert.equal(logged.type, 'DatabaseError');
    assert.match(logged.message, /duplicate key value violates unique constraint/);
  });

  it('gives activities a retryable error with the same summary', async () => {
    const safe = safeError(await uniqueViolationCarrying(secret)) as Error;
    assert.equal(safe.name, 'DatabaseError');
    assert.ok(!safe.message.includes('whsec_') && !(safe.stack ?? '').includes('whsec_'), safe.stack);
    const other = new Error('not a database error');
    assert.equal(safeError(other), other);
  });
});
