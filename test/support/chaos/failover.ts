import path from 'node:path';
import { ConnectionWatch, type ConnectionSample } from '../connection-watch';
import { eventually } from '../eventually';
import { PrimaryWithStandby, STANDBY } from '../standby';
import { logTail, running, type Component } from './components';
import { sigkill, type StartedProcesses } from './started-processes';

/** What the drill saw of the failover, for its assertions. */
export interface FailoverEvidence {
  /** The standby's sync_state on the primary just before the SIGKILL: `sync`, so every commit answered was on it. */
  syncStateAtKill?: string;
  /** When the standby was promoted (this machine's clock, as the API's `created_at`). */
  promotedAt?: Date;
  /** Requests with an Idempotency-Key first seen after the promotion and answered 2xx: writes on the new primary. */
  writesAfterPromotion?: number;
  /** The most client connections the standby had at once (sampled each second from the start), by application_name. */
  standbyConnectionsPeak?: ConnectionSample;
}

/**
 * PostgreSQL for the failover drill (test/postgres-failover.test.ts), as the chaos run's `postgres` component: a primary and a
 * synchronous standby (PrimaryWithStandby), the service's DATABASE_URL naming both, the primary first, with
 * target_session_attrs=read-write. Its one kill is SIGKILL to the primary's process group; its start after that is the
 * failover: the standby promoted, what a failover manager (Patroni, a managed service) does once the primary is gone.
 * The old primary stays dead, still first in the URL.
 */
export class FailoverPostgres implements Component {
  readonly name = 'postgres' as const;
  readonly evidence: FailoverEvidence = {};
  /** The postmaster taking writes: the primary's, none between the kill and the promotion, then the promoted standby's. */
  private writablePid = 0;
  private standbyConnections: ConnectionWatch | undefined;

  private constructor(
    private readonly servers: PrimaryWithStandby,
    private readonly processes: StartedProcesses,
  ) {
    processes.watchPidFile('postgres primary', path.join(servers.primaryDir, 'data/postmaster.pid'), true);
    processes.watchPidFile('postgres standby', path.join(servers.standbyDir, 'data/postmaster.pid'), true);
  }

  /** The chaos run's `postgres` option. */
  static async create(dir: string, processes: StartedProcesses): Promise<{ component: FailoverPostgres; databaseUrl: string }> {
    const servers = await PrimaryWithStandby.create(dir);
    return { component: new FailoverPostgres(servers, processes), databaseUrl: servers.failoverUrl() };
  }

  async start() {
    const { servers } = this;
    if (this.evidence.promotedAt) throw new Error('the drill has no server left to fail over to');
    if (servers.primaryPid === 0) {
      await servers.start();
      this.processes.started('postgres primary', servers.primaryPid, true);
      this.processes.started('postgres standby', servers.standbyPid, true);
      this.writablePid = servers.primaryPid;
      this.standbyConnections = await ConnectionWatch.start(servers.url(servers.ports.standby));
      return;
    }
    await servers.promote();
    this.evidence.promotedAt = new Date();
    this.writablePid = servers.standbyPid;
  }

  /**
   * SIGKILL to the primary's process group, after reading the standby's sync state: the postmaster alone (PostgreSQL's
   * children each lead a session of their own), its backends ending as they notice (FATAL 57P01 to an idle client).
   */
  async kill() {
    const { servers } = this;
    if (this.evidence.promotedAt || !(await running(servers.primaryPid))) return false;
    this.evidence.syncStateAtKill = await servers.value(servers.ports.primary, `SELECT sync_state FROM pg_stat_replication WHERE application_name = '${STANDBY}'`);
    if (!sigkill({ pid: servers.primaryPid, group: true })) return false;
    await eventually(async () => ((await running(servers.primaryPid)) ? undefined : true), 'the primary gone', 30_000, 100);
    this.processes.ended(servers.primaryPid);
    this.writablePid = 0;
    return true;
  }

  alive() {
    return this.writablePid === 0 ? Promise.resolve(false) : running(this.writablePid);
  }

  /** Counts the writes answered after the promotion (the drill's evidence, read while the server is still there), then stops both servers. */
  async stop() {
    const { servers } = this;
    this.evidence.standbyConnectionsPeak = await this.standbyConnections?.stop();
    if (this.evidence.promotedAt && (await running(servers.standbyPid))) {
      this.evidence.writesAfterPromotion = Number(
        await servers.value(
          servers.ports.standby,
          `SELECT count(*) FROM idempotency_records WHERE status = 'completed' AND response_status < 300 AND created_at > '${this.evidence.promotedAt.toISOString()}'`,
        ),
      );
    }
    await servers.stop();
    this.processes.ended(servers.primaryPid);
    this.processes.ended(servers.standbyPid);
  }

  /** Read now: the run's folder, logs included, is removed at its end. */
  log() {
    return `postgres primary: ${logTail(path.join(this.servers.primaryDir, 'postgres.log'))}\npostgres standby: ${logTail(path.join(this.servers.standbyDir, 'postgres.log'))}`;
  }
}
