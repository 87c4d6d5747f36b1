import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { running, shell } from './chaos/components';
import { freeLoopbackPort } from './ports';

/** The standby's name: its replication slot, and the application_name the primary's synchronous_standby_names names. */
export const STANDBY = 'standby1';

/**
 * A PostgreSQL primary (fsync on, as `npm start` runs one) and a streaming standby that every commit waits for
 * (synchronous_commit on, synchronous_standby_names naming it), in `dir`, from scripts/postgres.sh: the failover
 * drill's servers (test/postgres-failover.test.ts) and those of the multi-host connection's test (test/db/writable-host.test.ts).
 */
export class PrimaryWithStandby {
  /** The postmasters, once started: each leads a process group of its own (pg_ctl starts it in a session). */
  primaryPid = 0;
  standbyPid = 0;

  private constructor(
    readonly dir: string,
    readonly ports: { primary: number; standby: number },
  ) {}

  static async create(dir: string): Promise<PrimaryWithStandby> {
    return new PrimaryWithStandby(dir, { primary: await freeLoopbackPort(), standby: await freeLoopbackPort() });
  }

  get primaryDir(): string {
    return path.join(this.dir, 'primary');
  }

  get standbyDir(): string {
    return path.join(this.dir, 'standby');
  }

  /** A URL of one server. */
  url(port: number, database = 'postgres'): string {
    return `postgresql://postgres@127.0.0.1:${port}/${database}`;
  }

  /** The service's URL: both servers, the primary first, the writable one wanted. */
  failoverUrl(database = 'postgres'): string {
    return `postgresql://postgres@127.0.0.1:${this.ports.primary},127.0.0.1:${this.ports.standby}/${database}?target_session_attrs=read-write`;
  }

  /** Both servers up, the standby streaming in sync. */
  async start(): Promise<void> {
    await shell('pg_start_cluster "$@"', this.primaryDir, String(this.ports.primary));
    this.primaryPid = await postmaster(this.primaryDir);
    await shell('pg_start_standby "$@"', String(this.ports.primary), STANDBY, this.standbyDir, String(this.ports.standby));
    this.standbyPid = await postmaster(this.standbyDir);
    await shell('pg_require_synchronous_standby "$@"', this.url(this.ports.primary), STANDBY);
  }

  /** pg_ctl promote: the standby takes writes. */
  async promote(): Promise<void> {
    await shell('pg_promote "$@"', this.standbyDir);
  }

  /** The first column of the first row of one statement on the server at `port`. */
  async value(port: number, statement: string): Promise<string | undefined> {
    const client = new pg.Client({ connectionString: this.url(port) });
    await client.connect();
    try {
      return Object.values((await client.query<Record<string, unknown>>(statement)).rows[0] ?? {})[0]?.toString();
    } finally {
      await client.end();
    }
  }

  /** Each server that still runs, stopped. */
  async stop(): Promise<void> {
    for (const [dir, pid] of [
      [this.standbyDir, this.standbyPid],
      [this.primaryDir, this.primaryPid],
    ] as const) {
      // A SIGKILLed postmaster may linger as a zombie (nothing reaps it), which pg_ctl would take for a running server.
      if (pid !== 0 && (await running(pid))) await shell('pg_stop_cluster "$@"', dir);
    }
  }
}

async function postmaster(dir: string): Promise<number> {
  return Number((await readFile(path.join(dir, 'data/postmaster.pid'), 'utf8')).split('\n')[0]);
}
