import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Migrator } from '@mikro-orm/migrations';
import { defineConfig, type Options } from '@mikro-orm/postgresql';
import { entities } from './entities';

/**
 * TLS to PostgreSQL from the URL's libpq-style `sslmode` (and `sslrootcert`), which MikroORM's own
 * URL parsing drops: `disable` (default), `require` (encrypted, the server's certificate not checked,
 * as libpq means it), `verify-ca` / `verify-full` (checked against `sslrootcert` or the system's CAs;
 * verify-full also checks the host name).
 */
export function databaseTls(databaseUrl: string): false | { rejectUnauthorized: boolean; ca?: string; checkServerIdentity?: () => undefined } {
  const url = new URL(databaseUrl);
  const mode = url.searchParams.get('sslmode') ?? 'disable';
  const rootCert = url.searchParams.get('sslrootcert');
  const ca = rootCert ? { ca: readFileSync(rootCert, 'utf8') } : {};
  switch (mode) {
    case 'disable':
      return false;
    case 'require':
      return { rejectUnauthorized: false };
    case 'verify-ca':
      return { rejectUnauthorized: true, ...ca, checkServerIdentity: () => undefined };
    case 'verify-full':
      return { rejectUnauthorized: true, ...ca };
    default:
      throw new Error(`DATABASE_URL sslmode=${mode} is not supported: use disable, require, verify-ca or verify-full`);
  }
}

/** One ORM configuration for the app, the worker, the CLI and the migration tooling. */
export function ormConfig(databaseUrl: string, poolMax = 10): Options {
  const tls = databaseTls(databaseUrl);
  return defineConfig({
    clientUrl: databaseUrl,
    ...(tls ? { driverOptions: { connection: { ssl: tls } } } : {}),
    entities,
    pool: { min: 0, max: poolMax },
    // Migrations are compiled with the rest; the TypeScript sources are what `migration:create` writes.
    migrations: {
      path: path.join(__dirname, 'migrations'),
      pathTs: path.join(__dirname, '../../../src/db/migrations'),
      glob: '!(*.d).{js,ts}',
      transactional: true,
      allOrNothing: true,
      snapshot: true,
      snapshotName: '.snapshot',
      emit: 'ts',
      // The CLI and start script report what was applied; the migrator's own console lines are noise in tests.
      silent: true,
    },
    extensions: [Migrator],
    forceUtcTimezone: true,
    debug: false,
  });
}

// The mikro-orm CLI (`npm run migration:create`) loads this file's default export.
export default ormConfig(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:54329/custody');
