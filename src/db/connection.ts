import { readFileSync } from 'node:fs';
import { PostgreSqlKnexDialect } from '@mikro-orm/postgresql';
import pg from 'pg';
import { parseDatabaseUrl, type DatabaseUrl } from './database-url';
import { WritableHost, clientFor } from './writable-host';

/**
 * How every part of the service connects to DATABASE_URL's PostgreSQL (the ORM's knex pool, its statement pool
 * in lean.ts, the API key cache's listener, the CLI and the migrations through the ORM): the same settings and a
 * Client class that connects to the URL's writable host (writable-host.ts). One per URL in a process, so that all
 * of them share what they learn of a failover.
 */
export interface PostgresConnection {
  url: DatabaseUrl;
  /** User, password, database, TLS and the connect timeout; the host and port are the Client's to choose. */
  settings: pg.ClientConfig;
  Client: typeof pg.Client;
  /** The same Client class as a knex dialect, for the ORM (`driverOptions.client`). */
  Dialect: typeof PostgreSqlKnexDialect;
}

/** A dead host that drops packets instead of refusing would hold each probe for the operating system's TCP timeout (minutes). */
const DEFAULT_CONNECT_TIMEOUT_S_SEVERAL_HOSTS = 10;

const connections = new Map<string, PostgresConnection>();

export function postgresConnection(databaseUrl: string): PostgresConnection {
  let connection = connections.get(databaseUrl);
  if (!connection) {
    const url = parseDatabaseUrl(databaseUrl);
    const tls = databaseTls(url);
    const timeoutSeconds = url.connectTimeoutSeconds ?? (url.hosts.length > 1 ? DEFAULT_CONNECT_TIMEOUT_S_SEVERAL_HOSTS : undefined);
    const settings: pg.ClientConfig = {
      ...(url.user === undefined ? {} : { user: url.user }),
      ...(url.password === undefined ? {} : { password: url.password }),
      database: url.database,
      ...(tls ? { ssl: tls } : {}),
      ...(timeoutSeconds === undefined ? {} : { connectionTimeoutMillis: timeoutSeconds * 1000 }),
    };
    const Client = clientFor(new WritableHost(url, settings));
    class Dialect extends PostgreSqlKnexDialect {
      // knex makes each pooled connection with its driver's Client: pg, but for that.
      _driver() {
        return Object.assign(Object.create(pg) as typeof pg, { Client });
      }
    }
    connection = { url, settings, Client, Dialect };
    connections.set(databaseUrl, connection);
  }
  return connection;
}

/**
 * TLS to PostgreSQL from the URL's libpq-style `sslmode` (and `sslrootcert`), which MikroORM's own
 * URL parsing drops: `disable` (default), `require` (encrypted, the server's certificate not checked,
 * as libpq means it), `verify-ca` / `verify-full` (checked against `sslrootcert` or the system's CAs;
 * verify-full also checks the host name: each host's own, with several).
 */
export function databaseTls(databaseUrl: string | DatabaseUrl): false | { rejectUnauthorized: boolean; ca?: string; checkServerIdentity?: () => undefined } {
  const url = typeof databaseUrl === 'string' ? parseDatabaseUrl(databaseUrl) : databaseUrl;
  const ca = url.sslrootcert ? { ca: readFileSync(url.sslrootcert, 'utf8') } : {};
  switch (url.sslmode) {
    case 'disable':
      return false;
    case 'require':
      return { rejectUnauthorized: false };
    case 'verify-ca':
      return { rejectUnauthorized: true, ...ca, checkServerIdentity: () => undefined };
    case 'verify-full':
      return { rejectUnauthorized: true, ...ca };
  }
}
