import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { mkdirSync, openSync, closeSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { TypedSearchAttributes } from '@temporalio/common';
import { SEARCH_ATTRIBUTE_KEYS } from '../../src/temporal/search-attributes';
import { logTail } from './chaos/components';

const ROOT = path.resolve(__dirname, '../../..');
const SCRIPT = path.join(ROOT, 'scripts/temporal-cluster.sh');

/** The processes of the cluster, each a `temporal-server start --service` of its own (scripts/temporal-cluster.sh). */
export const CLUSTER_SERVICES = ['frontend', 'history-1', 'history-2', 'matching', 'worker'] as const;
export type ClusterService = (typeof CLUSTER_SERVICES)[number];

/** Where the cluster keeps its state: databases on a PostgreSQL server (of the given names), its configuration and logs in `dir`. */
export interface ClusterOptions {
  dir: string;
  pgHost?: string;
  pgPort: number;
  pgUser?: string;
  pgPassword?: string;
  database: string;
  visibilityDatabase: string;
  /** History shards (TEMPORAL_CLUSTER_SHARDS: 4 unless set), fixed when the databases are made. */
  shards?: number;
  /** Told of every service process started (the chaos driver keeps a list of what it must not leave running). */
  started?: (service: ClusterService, pid: number) => void;
}

function script(command: string, dir: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('bash', [SCRIPT, command, dir], { cwd: ROOT, env: { ...process.env, ...env } }, (error, stdout, stderr) =>
      error ? reject(new Error(`temporal-cluster.sh ${command}: ${error.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

/** Whether scripts/ensure-tools.sh built the server (it needs Go): the cluster's tests skip without it, and fail under CI. */
export function temporalServerBuilt(): Promise<boolean> {
  return new Promise((resolve) => execFile('bash', ['-c', `source "${ROOT}/scripts/lib.sh" && temporal_server_dir`], (error) => resolve(!error)));
}

/**
 * A Temporal cluster of separate processes on PostgreSQL, driven service by service: the tests kill and start
 * single services (a history process, the matching service) while the rest runs. Every process it starts is
 * SIGKILLed when this process exits, whatever ends it.
 */
export class TemporalCluster {
  private readonly processes = new Map<ClusterService, ChildProcess>();
  private readonly env: NodeJS.ProcessEnv;
  private readonly killAll = () => this.processes.forEach((child) => child.kill('SIGKILL'));
  private frontendPort = 0;

  constructor(private readonly options: ClusterOptions) {
    this.env = {
      TEMPORAL_CLUSTER_PG_HOST: options.pgHost ?? '127.0.0.1',
      TEMPORAL_CLUSTER_PG_PORT: String(options.pgPort),
      TEMPORAL_CLUSTER_PG_USER: options.pgUser ?? 'postgres',
      TEMPORAL_CLUSTER_PG_PASSWORD: options.pgPassword ?? '',
      TEMPORAL_CLUSTER_DATABASE: options.database,
      ...(options.shards ? { TEMPORAL_CLUSTER_SHARDS: String(options.shards) } : {}),
      TEMPORAL_CLUSTER_VISIBILITY_DATABASE: options.visibilityDatabase,
      // Every port a free one: several clusters run at once in a test run.
      TEMPORAL_CLUSTER_PORT: '0',
      TEMPORAL_CLUSTER_SEARCH_ATTRIBUTES: SEARCH_ATTRIBUTE_KEYS.map(({ name, type }) => `${name}=${TypedSearchAttributes.toMetadataType(type)}`).join(' '),
    };
    process.on('exit', this.killAll);
  }

  /** Databases, schemas and configuration, every service, then the namespace and search attributes; the seconds it took. */
  async start(): Promise<number> {
    const started = performance.now();
    mkdirSync(this.options.dir, { recursive: true });
    await script('setup', this.options.dir, this.env);
    this.frontendPort = Number(/^FRONTEND_PORT=(\d+)$/m.exec(readFileSync(path.join(this.options.dir, 'ports.env'), 'utf8'))![1]);
    // The first process writes the cluster's metadata record, and others starting meanwhile fail on it: the frontend
    // first, the rest once it listens (the record is written by then).
    this.startService('frontend');
    await this.listening(this.frontendPort, 'frontend');
    for (const name of CLUSTER_SERVICES.filter((each) => each !== 'frontend')) this.startService(name);
    await script('namespace', this.options.dir, this.env).catch((error: Error) => {
      throw new Error(`${error.message}\n${this.logs(['frontend'])}`);
    });
    return (performance.now() - started) / 1000;
  }

  private async listening(port: number, name: ClusterService): Promise<void> {
    for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
      if (!this.running(name)) break;
      const open = await new Promise<boolean>((resolve) => {
        const socket = connect(port, '127.0.0.1');
        socket.once('connect', () => {
          socket.destroy();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      });
      if (open) return;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(`the Temporal ${name} did not start listening on ${port}\n${this.logs([name])}`);
  }

  get address(): string {
    return `127.0.0.1:${this.frontendPort}`;
  }

  /** Starts one service (again); its pid is the server's (the script execs it). */
  startService(name: ClusterService): number {
    // Its stdout and stderr (the server logs there, errors included) to its file, never to the test run's output.
    const log = openSync(this.logFile(name), 'a');
    const child = spawn('bash', [SCRIPT, 'service', this.options.dir, name], { cwd: ROOT, env: { ...process.env, ...this.env }, stdio: ['ignore', log, log] });
    closeSync(log);
    this.processes.set(name, child);
    this.options.started?.(name, child.pid!);
    return child.pid!;
  }

  pid(name: ClusterService): number | undefined {
    return this.processes.get(name)?.pid;
  }

  running(name: ClusterService): boolean {
    const child = this.processes.get(name);
    return !!child && child.exitCode === null && child.signalCode === null;
  }

  /** SIGKILL to one service, resolved once it is gone; false when it was not running. */
  async kill(name: ClusterService): Promise<boolean> {
    const child = this.processes.get(name);
    if (!child || !this.running(name)) return false;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    return true;
  }

  logFile(name: ClusterService): string {
    return path.join(this.options.dir, 'logs', `${name}.log`);
  }

  /** The end of the log of each service named (the one that failed), for a failure message. */
  logs(names: readonly ClusterService[] = CLUSTER_SERVICES): string {
    return names.map((name) => `temporal ${name}: ${logTail(this.logFile(name))}`).join('\n');
  }

  /** SIGTERM to every service (the frontend last), SIGKILL to any still running 20 s later. */
  async stop(): Promise<void> {
    for (const name of [...CLUSTER_SERVICES].reverse()) {
      const child = this.processes.get(name);
      if (!child || !this.running(name)) continue;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }
    process.off('exit', this.killAll);
  }
}
