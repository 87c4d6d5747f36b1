import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger, safeError } from '../src/logger';
import { testOrm } from './support/environment';

/** No secret in a log line or a workflow history: neither a failed statement's bound values nor a payout beneficiary's numbers. */
describe('Secrets in logs and activity failures: database errors, payout beneficiaries', () => {
  const secret = `whsec_${Buffer.from('never-in-a-log-line-0123456789').toString('base64')}`;

  // A table of its own, dropped afterwards (a temporary table would live on one pooled connection only).
  const table = `log_probe_${process.pid}`;
  after(async () => {
    await (await testOrm()).em.fork().getConnection().execute(`drop table if exists ${table}`);
  });

  /** A logger whose lines are kept in `lines`. */
  function capturedLogger() {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    return { logger: createLogger('info', 'test', sink), lines };
  }

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
    const { logger, lines } = capturedLogger();
    logger.error({ err: error }, 'unhandled error');
    const line = lines.join('');
    assert.ok(!line.includes('whsec_'), line);
    assert.ok(!/insert into/i.test(line), line);
    assert.ok(!line.includes('already exists'), 'no detail');
    const logged = JSON.parse(line).err;
    assert.equal(logged.code, '23505');
    assert.equal(logged.type, 'DatabaseError');
    assert.match(logged.message, /duplicate key value violates unique constraint/);
  });

  it("redacts a payout beneficiary's account and phone numbers from a logged body or instruction", () => {
    const { logger, lines } = capturedLogger();
    logger.info({ body: { beneficiary: { type: 'bank', accountNumber: '0123456789', bankCode: '058' } } }, 'request');
    logger.info({ beneficiary: { type: 'mobile_money', phoneNumber: '+254712345678', network: 'MPESA' } }, 'instruction');
    const text = lines.join('');
    assert.ok(!text.includes('0123456789') && !text.includes('712345678'), text);
    assert.ok(text.includes('MPESA') && text.includes('058'), 'the rest is logged');
  });

  it('gives activities a retryable error with the same summary', async () => {
    const safe = safeError(await uniqueViolationCarrying(secret)) as Error;
    assert.equal(safe.name, 'DatabaseError');
    assert.ok(!safe.message.includes('whsec_') && !(safe.stack ?? '').includes('whsec_'), safe.stack ?? safe.message);
    const other = new Error('not a database error');
    assert.equal(safeError(other), other);
  });
});
