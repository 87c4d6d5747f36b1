/**
 * DATABASE_URL in libpq's URI format, several hosts included, which neither node-postgres nor MikroORM
 * reads (both go through WHATWG `URL`, which refuses `h1:5432,h2:5432`):
 *
 *   postgresql://user:password@h1:5432,h2:5433/custody?target_session_attrs=read-write&sslmode=require
 *
 * Each host defaults to port 5432; an IPv6 address goes in brackets. What the service reads of the query:
 * `sslmode` and `sslrootcert` (src/db/mikro-orm.config.ts), `target_session_attrs` (`any`, the default: the
 * first host that answers; `read-write`: the first that accepts writes, libpq's meaning) and
 * `connect_timeout` (seconds per host, libpq's); other parameters are ignored, as before.
 * Errors name DATABASE_URL and never repeat the URL: it may hold the password.
 */
export interface DatabaseHost {
  host: string;
  port: number;
}

export const TARGET_SESSION_ATTRS = ['any', 'read-write'] as const;
export const SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const;

export interface DatabaseUrl {
  hosts: DatabaseHost[];
  user?: string;
  password?: string;
  database: string;
  sslmode: (typeof SSL_MODES)[number];
  sslrootcert?: string;
  targetSessionAttrs: (typeof TARGET_SESSION_ATTRS)[number];
  /** connect_timeout: how long a connection attempt to one host may take before the next host is tried. */
  connectTimeoutSeconds?: number;
}

export class DatabaseUrlError extends Error {
  constructor(reason: string) {
    super(`DATABASE_URL ${reason} (expected postgresql://user[:password]@host[:port][,host[:port]…]/database[?target_session_attrs=read-write])`);
    this.name = 'DatabaseUrlError';
  }
}

const DEFAULT_PORT = 5432;
const SHAPE = /^postgres(?:ql)?:\/\/([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?$/;

export function parseDatabaseUrl(url: string): DatabaseUrl {
  const shape = SHAPE.exec(url);
  if (!shape) throw new DatabaseUrlError('must be a postgresql:// URL');
  const [, authority = '', path, query] = shape;
  // The last `@` ends the user part: hosts hold none, a password may (libpq wants it encoded, but tolerates it).
  const at = authority.lastIndexOf('@');
  const [user, password] = at < 0 ? [] : splitUser(authority.slice(0, at));
  const hosts = authority
    .slice(at + 1)
    .split(',')
    .map(parseHost);
  const params = new URLSearchParams(query ?? '');
  const sslmode = params.get('sslmode') ?? 'disable';
  if (!isOneOf(SSL_MODES, sslmode)) throw new DatabaseUrlError(`sslmode=${sslmode} is not supported: use ${SSL_MODES.join(', ')}`);
  const targetSessionAttrs = params.get('target_session_attrs') ?? 'any';
  if (!isOneOf(TARGET_SESSION_ATTRS, targetSessionAttrs)) throw new DatabaseUrlError(`target_session_attrs=${targetSessionAttrs} is not supported: use ${TARGET_SESSION_ATTRS.join(' or ')}`);
  const timeout = params.get('connect_timeout');
  if (timeout !== null && !/^[1-9][0-9]{0,4}$/.test(timeout)) throw new DatabaseUrlError('connect_timeout must be a whole number of seconds');
  const database = path ? decode(path, 'database name') : '';
  if (database === '') throw new DatabaseUrlError('names no database');
  return {
    hosts,
    ...(user ? { user } : {}),
    ...(password ? { password } : {}),
    database,
    sslmode,
    ...(params.get('sslrootcert') ? { sslrootcert: params.get('sslrootcert')! } : {}),
    targetSessionAttrs,
    ...(timeout ? { connectTimeoutSeconds: Number(timeout) } : {}),
  };
}

/** `host:port` of each host, for messages (no user, no password). */
export const describeHosts = (hosts: readonly DatabaseHost[]): string => hosts.map(describeHost).join(', ');
export const describeHost = ({ host, port }: DatabaseHost): string => `${host.includes(':') ? `[${host}]` : host}:${port}`;

function splitUser(userinfo: string): [string | undefined, string | undefined] {
  const colon = userinfo.indexOf(':');
  const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
  return [user ? decode(user, 'user name') : undefined, colon < 0 ? undefined : decode(userinfo.slice(colon + 1), 'password')];
}

function parseHost(spec: string): DatabaseHost {
  const parts = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+))(?::([0-9]{1,5}))?$/.exec(spec);
  if (!parts) throw new DatabaseUrlError(spec === '' ? 'names an empty host' : 'has a host that is not host[:port] (an IPv6 address in brackets)');
  const port = parts[3] === undefined ? DEFAULT_PORT : Number(parts[3]);
  if (port < 1 || port > 65535) throw new DatabaseUrlError('has a port outside 1-65535');
  return { host: parts[1] ?? decode(parts[2]!, 'host'), port };
}

/** Percent-decoding that names the part it failed on, never its value (a password's). */
function decode(text: string, part: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new DatabaseUrlError(`has a badly percent-encoded ${part}`);
  }
}

const isOneOf = <T extends string>(allowed: readonly T[], value: string): value is T => (allowed as readonly string[]).includes(value);
