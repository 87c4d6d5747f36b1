import 'reflect-metadata';
import path from 'node:path';
import { Migrator } from '@mikro-orm/migrations';
import { defineConfig, type Options } from '@mikro-orm/postgresql';
import { applicationName } from './application-name';
import { postgresConnection } from './connection';
import { entities } from './entities';

/** One ORM configuration for the app, the worker, the CLI and the migration tooling. */
export function ormConfig(databaseUrl: string, poolMax = 10): Options {
  const { url, settings, Dialect } = postgresConnection(databaseUrl);
  return defineConfig({
    // Not `clientUrl`: MikroORM reads it with WHATWG URL, which refuses several hosts. The first host stands for the
    // URL where MikroORM names it; connections go where the dialect's Client finds the writable one (connection.ts).
    host: url.hosts[0]!.host,
    port: url.hosts[0]!.port,
    ...(url.user === undefined ? {} : { user: url.user }),
    ...(url.password === undefined ? {} : { password: url.password }),
    dbName: url.database,
    driverOptions: { client: Dialect, connection: { ...settings, application_name: applicationName('orm') } },
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
