import pg from 'pg';
import { applicationName } from './application-name';
import { describeHost, describeHosts, type DatabaseHost, type DatabaseUrl } from './database-url';

/**
 * Which of DATABASE_URL's hosts new connections go to, as libpq picks one (node-postgres cannot: one host per
 * client): the hosts in their order, the first that answers, and with `target_session_attrs=read-write` the
 * first that accepts writes (`transaction_read_only` off: not a standby, not read-only by default). The host
 * found is kept for every new connection until a connection to it fails or is lost (the primary died, or was
 * demoted, which restarts it): the next one looks again, so after a failover new connections go to the promoted
 * standby while those to the old primary fail and leave their pools (knex's and pg's pools drop a client whose
 * connection errored). Connections made before a failover are not moved: the old primary is dead or restarted.
 * A single host with `any` is taken as it is, without a probe.
 */
export class WritableHost {
  private found: DatabaseHost | undefined;
  private looking: Promise<DatabaseHost> | undefined;

  constructor(
    private readonly url: DatabaseUrl,
    /** User, password, database and TLS, as every connection of the URL uses them. */
    private readonly settings: pg.ClientConfig,
  ) {}

  /** The host a new connection goes to. */
  target(): Promise<DatabaseHost> {
    if (this.url.hosts.length === 1 && this.url.targetSessionAttrs === 'any') return Promise.resolve(this.url.hosts[0]!);
    if (this.found) return Promise.resolve(this.found);
    return (this.looking ??= this.look().finally(() => (this.looking = undefined)));
  }

  /** A connection to `host` failed or was lost: the next connection looks for the host again. */
  lost(host: DatabaseHost): void {
    if (this.found === host) this.found = undefined;
  }

  private async look(): Promise<DatabaseHost> {
    const refusals: string[] = [];
    let lastError: unknown;
    for (const host of this.url.hosts) {
      const probe = new pg.Client({ ...this.settings, application_name: applicationName('probe'), host: host.host, port: host.port });
      probe.on('error', () => undefined);
      try {
        await probe.connect();
        if (this.url.targetSessionAttrs === 'any' || (await probe.query<{ transaction_read_only: string }>('show transaction_read_only')).rows[0]?.transaction_read_only === 'off') {
          this.found = host;
          return host;
        }
        refusals.push(`${describeHost(host)} is read-only`);
      } catch (error) {
        lastError = error;
        refusals.push(`${describeHost(host)}: ${(error as Error).message}`);
      } finally {
        await probe.end().catch(() => undefined);
      }
    }
    throw new NoHostError(this.url, refusals, lastError);
  }
}

/**
 * None of the hosts took a connection (mid-failover: the primary dead, the standby not promoted yet). SQLSTATE
 * 08001 (unable to establish a connection), libpq's case, so the service answers 503 and its start-up waits.
 */
export class NoHostError extends Error {
  readonly code = '08001';
  constructor(url: DatabaseUrl, refusals: string[], cause: unknown) {
    super(`no ${url.targetSessionAttrs === 'read-write' ? 'writable ' : ''}PostgreSQL among DATABASE_URL's hosts ${describeHosts(url.hosts)} (${refusals.join('; ')})`, { cause });
    this.name = 'NoHostError';
  }
}

type ConnectCallback = ((error: Error) => void) | ((error: null, client: pg.Client) => void);

/**
 * A node-postgres Client class whose connections go to `writable`'s target: what knex (through the ORM's dialect)
 * and pg's Pool make each connection of. A failed connect, or an error of the connection later, tells `writable`.
 */
export function clientFor(writable: WritableHost): typeof pg.Client {
  return class WritableHostClient extends pg.Client {
    private target: DatabaseHost | undefined;

    constructor(config?: string | pg.ClientConfig) {
      super(config);
      // Listened to from the start, whoever holds the connection and whatever it is doing: an 'error' nothing listens
      // to throws and ends the process. A backend that ends (its postmaster killed in a failover, an administrator's
      // pg_terminate_backend) sends a FATAL whether or not a query runs; pg's Pool listens only while a connection is
      // idle or runs pool.query's statement. The connection is unusable after it: its next query fails (a 503, an
      // activity's retry) and its pool drops it.
      this.on('error', () => {
        if (this.target) writable.lost(this.target);
      });
    }

    // pg's own overloads: a promise, or a callback (pg's Pool).
    override connect(): Promise<pg.Client>;
    override connect(callback: ConnectCallback): void;
    override connect(callback?: ConnectCallback): Promise<pg.Client> | void {
      if (!callback) return new Promise((resolve, reject) => this.connect((error: Error | null) => (error ? reject(error) : resolve(this))));
      const done = callback as (error: Error | null, client?: pg.Client) => void;
      writable.target().then((target) => {
        // The address pg's connect reads; TLS's server name follows it.
        this.target = target;
        this.host = target.host;
        this.port = target.port;
        // pg calls back in the same tick as the server's ReadyForQuery, as the caller expects: pg's Pool takes the
        // connection and listens to it there, before a FATAL read in the same chunk can reach it (a promise's
        // callbacks come a few microtasks later, after the chunk's other messages).
        super.connect((error: Error | null) => {
          if (!error) return done(null, this);
          writable.lost(target);
          done(error);
        });
      }, done);
    }
  };
}
