import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { eventually } from '../eventually';
import { processStat } from '../proc-stat';
import { ServiceProcess } from '../service-process';
import { ComponentName, ROOT, sleep } from './model';
import { sigkill, type StartedProcesses } from './started-processes';

/** Bash code using the helpers of scripts/lib.sh and scripts/postgres.sh (the same clusters and dev server `npm start` runs), with `args` as "$@"; its stdout. */
export function shell(code: string, ...args: string[]): Promise<string> {
  const script = `source "${ROOT}/scripts/lib.sh"; source "${ROOT}/scripts/postgres.sh"; ${code}`;
  const command = [code, ...args];
  return new Promise((resolve, reject) =>
    execFile('bash', ['-c', script, 'chaos', ...args], { cwd: ROOT, env: { ...process.env, LIB_SCRIPT_NAME: 'chaos' } }, (error, stdout, stderr) =>
      error ? reject(new Error(`${command.join(' ')}: ${error.message}\n${stderr}`)) : resolve(stdout.trim()),
    ),
  );
}

/** Whether a process (not necessarily our child) runs: a zombie waiting for init to reap it does not. */
export async function running(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = processStat(pid);
  return stat !== undefined && stat.state !== 'Z';
}

/** SIGKILL to a component's process (or group) and wait until it is gone; false when there was nothing to kill. */
export async function killAndWait(component: Component, processes: StartedProcesses, target: { pid: number; group: boolean }): Promise<boolean> {
  if (!(await component.alive()) || !sigkill(target)) return false;
  await eventually(async () => ((await component.alive()) ? undefined : true), `${component.name} gone`, 30_000, 100);
  processes.ended(target.pid);
  return true;
}

/** The end of a component's log file, read when an exit is counted: the run's folder is removed at its end. */
export function logTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-600);
  } catch (error) {
    return `(${file} unreadable: ${(error as Error).message})`;
  }
}

/** A component the chaos kills and starts again. */
export interface Component {
  readonly name: ComponentName;
  start(): Promise<void>;
  /** SIGKILL, and wait until it is gone; false when it was gone already (nothing to kill). */
  kill(): Promise<boolean>;
  alive(): Promise<boolean>;
  /** The graceful stop at the end. */
  stop(): Promise<void>;
  log(): string;
}

/**
 * A PostgreSQL cluster of its own (pg_start_cluster: fsync on, so a crash loses no commit). A kill is
 * SIGKILL to the postmaster's process group (pg_ctl starts it in a session of its own): every backend
 * dies with it, as when its container is killed.
 */
export class PostgresComponent implements Component {
  readonly name = 'postgres' as const;
  private pid = 0;
  /** `label`: what the run's log calls it (the Temporal cluster's own server is another). */
  constructor(
    private readonly dir: string,
    readonly port: number,
    private readonly processes: StartedProcesses,
    private readonly label = 'postgres',
  ) {
    processes.watchPidFile(label, path.join(dir, 'data/postmaster.pid'), true);
  }

  async start() {
    await shell('pg_start_cluster "$@"', this.dir, String(this.port));
    this.pid = Number((await readFile(path.join(this.dir, 'data/postmaster.pid'), 'utf8')).split('\n')[0]);
    this.processes.started(this.label, this.pid, true);
  }

  async kill() {
    return killAndWait(this, this.processes, { pid: this.pid, group: true });
  }

  alive() {
    return running(this.pid);
  }

  async stop() {
    await shell('pg_stop_cluster "$@"', this.dir);
    this.processes.ended(this.pid);
  }

  log() {
    return `${this.label}: ${logTail(path.join(this.dir, 'postgres.log'))}`;
  }
}

/** The API or the worker, `dist/src/<script>`, a new process on each start. */
export class NodeComponent implements Component {
  private process?: ServiceProcess;
  private lastLog = '';
  constructor(
    readonly name: 'api' | 'worker',
    private readonly script: string,
    private readonly env: NodeJS.ProcessEnv,
    private readonly processes: StartedProcesses,
  ) {}

  async start() {
    if (this.process) this.lastLog = this.process.log;
    this.process = new ServiceProcess(this.name, this.script, this.env);
    this.processes.started(this.name, this.process.pid);
  }

  async kill() {
    if (!this.process || !(await this.alive())) return false;
    await this.process.kill();
    this.processes.ended(this.process.pid);
    return true;
  }

  async alive() {
    return !!this.process && (await running(this.process.pid));
  }

  async stop() {
    await this.process?.stop();
    if (this.process) this.processes.ended(this.process.pid);
  }

  log() {
    return `${this.lastLog}\n${this.process?.log ?? ''}`;
  }
}

/**
 * Several processes of one component (two APIs behind a balancer, two workers on one task queue, two history
 * processes): a kill takes one of them, in turn, and a start brings back those that are down. It is up when all are.
 */
export class Replicas implements Component {
  private nextKill = 0;
  constructor(
    readonly name: ComponentName,
    private readonly replicas: Component[],
  ) {}

  async start() {
    for (const replica of this.replicas) if (!(await replica.alive())) await replica.start();
  }

  async kill() {
    const replica = this.replicas[this.nextKill++ % this.replicas.length]!;
    return replica.kill();
  }

  async alive() {
    return (await Promise.all(this.replicas.map((replica) => replica.alive()))).every(Boolean);
  }

  async stop() {
    await Promise.all(this.replicas.map((replica) => replica.stop()));
  }

  log() {
    return this.replicas.map((replica) => replica.log()).join('\n');
  }
}

/**
 * What the compose file's `restart: unless-stopped` does for one component: whatever makes it exit
 * (our SIGKILL, or a crash of its own, counted apart) it is started again, after a pause.
 */
export class Supervised {
  kills = 0;
  ownExits = 0;
  /** The end of its output before the last exit of its own, to say why. */
  lastOwnExit = '';
  private held = false;
  private stopped = false;
  private starting: Promise<void> | undefined;
  private ticking: Promise<void> | undefined;
  constructor(readonly component: Component) {}

  /** Starts it again if it is down and not held down by a kill in progress (one tick at a time). */
  tick(): Promise<void> {
    return (this.ticking ??= this.tickOnce().finally(() => (this.ticking = undefined)));
  }

  private async tickOnce(): Promise<void> {
    // Asked again after the liveness check: a kill or the run's stop may have begun meanwhile.
    if (this.held || this.stopped || this.starting || (await this.component.alive()) || this.held || this.stopped) return;
    this.countOwnExit();
    await this.restart();
  }

  /**
   * Supervision ends before the component's own stop, once the tick and the start in progress are done: a tick that
   * had asked whether it was alive just before the stop found a replica the stop had just ended, and started it again
   * after the last stop, running on after the run.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.ticking;
    await this.starting;
  }

  private countOwnExit(): void {
    this.ownExits += 1;
    this.lastOwnExit = this.component.log().trim().slice(-600);
  }

  private restart(): Promise<void> {
    // A start that fails (what it needs is down too) is tried again on a later tick.
    const starting = (this.starting ??= this.component
      .start()
      .catch(async () => void (await sleep(1000)))
      .finally(() => (this.starting = undefined)));
    return starting;
  }

  /**
   * SIGKILL, down for `downMs`, then started again (until it is up); what the kill found. A component found down
   * (it exited on its own since the last tick) is not killed: that exit is counted as its own, and it is started again.
   */
  async killFor(downMs: number): Promise<'killed' | 'found down'> {
    await this.starting;
    this.held = true;
    let found: 'killed' | 'found down';
    try {
      found = (await this.component.kill()) ? 'killed' : 'found down';
      if (found === 'killed') this.kills += 1;
      else this.countOwnExit();
      await sleep(downMs);
      // Still held while it is started again: a tick between the hold's end and the restart would find it down and
      // count our kill as an exit of its own (with two replicas, whose liveness takes longer to ask, it did).
      while (!this.stopped && !(await this.component.alive())) await this.restart();
    } finally {
      this.held = false;
    }
    return found;
  }
}
