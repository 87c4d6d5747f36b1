import assert from 'node:assert/strict';
import { secretRedactor } from '../../src/cli/doctor/check';
import { ConfigError, loadConfig } from '../../src/config';
import { DatabaseUrlError, parseDatabaseUrl } from '../../src/db/database-url';
import { ormConfig } from '../../src/db/mikro-orm.config';
import { testConfig } from '../support/environment';

describe('DATABASE_URL in libpq form, several hosts included', () => {
  it('reads one host as before: user, password, database, port 5432 by default', () => {
    assert.deepEqual(parseDatabaseUrl('postgresql://postgres@127.0.0.1:54329/custody'), {
      hosts: [{ host: '127.0.0.1', port: 54329 }],
      user: 'postgres',
      database: 'custody',
      sslmode: 'disable',
      targetSessionAttrs: 'any',
    });
    assert.deepEqual(parseDatabaseUrl('postgres://u:p%40ss@db.example/custody?sslmode=require').hosts, [{ host: 'db.example', port: 5432 }]);
    assert.equal(parseDatabaseUrl('postgres://u:p%40ss@db.example/custody').password, 'p@ss');
  });

  it('reads several hosts in their order, each with its port or 5432, IPv6 in brackets, and target_session_attrs', () => {
    const url = parseDatabaseUrl('postgresql://app:s3cr%2Ft@pg-a.internal:5433,pg-b.internal,[::1]:6432/custody?target_session_attrs=read-write&connect_timeout=3&sslmode=verify-full');
    assert.deepEqual(url.hosts, [
      { host: 'pg-a.internal', port: 5433 },
      { host: 'pg-b.internal', port: 5432 },
      { host: '::1', port: 6432 },
    ]);
    assert.deepEqual([url.user, url.password, url.database, url.targetSessionAttrs, url.connectTimeoutSeconds, url.sslmode], ['app', 's3cr/t', 'custody', 'read-write', 3, 'verify-full']);
  });

  it('gives the ORM the database, the first host and a dialect of its own, never a clientUrl MikroORM would parse with WHATWG URL', () => {
    const options = ormConfig('postgresql://app:pw@h1:5433,h2:5434/custody?target_session_attrs=read-write');
    assert.deepEqual([options.host, options.port, options.user, options.dbName, options.clientUrl], ['h1', 5433, 'app', 'custody', undefined]);
    assert.equal(typeof (options.driverOptions as { client: unknown }).client, 'function');
  });

  it('refuses a bad URL with an error that names DATABASE_URL and never holds the password', () => {
    const bad = [
      ['mysql://u:hunter2-pw@h/db', /must be a postgresql:\/\/ URL/],
      ['postgresql://u:hunter2-pw@h1:5432,/db', /names an empty host/],
      ['postgresql://u:hunter2-pw@h1:5432,h2:99999/db', /port outside 1-65535/],
      ['postgresql://u:hunter2-pw@h1:port/db', /not host\[:port\]/],
      ['postgresql://u:hunter2-pw@h1,h2', /names no database/],
      ['postgresql://u:hunter2-pw@h1,h2/db?target_session_attrs=primary', /target_session_attrs=primary is not supported/],
      ['postgresql://u:hunter2-pw@h1/db?sslmode=prefer', /sslmode=prefer is not supported/],
      ['postgresql://u:hunter2-pw@h1/db?connect_timeout=soon', /connect_timeout/],
      ['postgresql://u:hunter2%@h1/db', /badly percent-encoded password/],
    ] as const;
    for (const [url, reason] of bad) {
      assert.throws(
        () => parseDatabaseUrl(url),
        (error: unknown) => error instanceof DatabaseUrlError && error.message.startsWith('DATABASE_URL ') && reason.test(error.message) && !error.message.includes('hunter2'),
        url,
      );
      assert.throws(
        () => loadConfig({ DATABASE_URL: url }),
        (error: unknown) => error instanceof ConfigError && error.message.includes('DATABASE_URL: ') && reason.test(error.message) && !error.message.includes('hunter2'),
        url,
      );
    }
  });

  it('is taken by the configuration with several hosts, and the doctor shows its hosts, never its password', () => {
    const url = 'postgresql://app:db-password-9@pg-a:5433,pg-b:5434/custody?target_session_attrs=read-write';
    assert.equal(loadConfig({ DATABASE_URL: url }).DATABASE_URL, url);
    const redact = secretRedactor(testConfig({ DATABASE_URL: url }));
    assert.equal(redact(`database ${url} (password db-password-9)`), 'database postgresql://pg-a:5433,pg-b:5434 (password [redacted])');
  });
});
