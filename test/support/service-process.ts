import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import type { Connection } from '@temporalio/client';
import { eventually } from './eventually';

const DIST = path.resolve(__dirname, '../../src');

/** A service process (`dist/src/server.js` or `dist/src/worker.js`) as the compose file runs it, with its output kept for a failure message. */
export class ServiceProcess {
  private readonly child: ChildProcess;
  private output = '';
  readonly exited: Promise<unknown>;

  constructor(
    readonly name: string,
    script: string,
    env: NodeJS.ProcessEnv,
  ) {
    this.child = spawn(process.execPath, [path.join(DIST, script)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-4000);
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.exited = once(this.child, 'exit');
  }

  get pid(): number {
    return this.child.pid!;
  }

  get log(): string {
    return `${this.name}:\n${this.output}`;
  }

  /** SIGKILL: a crash, nothing drains. */
  /** SIGSTOP: the process holds what it took (its long polls, the tasks handed to them) and does nothing with it, as a hung one does. */
  freeze(): void {
    this.child.kill('SIGSTOP');
  }

  /** SIGCONT: a frozen process goes on where it stopped. */
  resume(): void {
    this.child.kill('SIGCONT');
  }

  /** Resolves once this process (a worker) polls `taskQueue`'s workflow tasks, with the seconds that took. */
  async polling(connection: Connection, namespace: string, taskQueue: string): Promise<number> {
    const started = Date.now();
    await eventually(
      async () => {
        const { pollers } = await connection.workflowService.describeTaskQueue({ namespace, taskQueue: { name: taskQueue }, taskQueueType: 1 });
        return pollers?.some((poller) => poller.identity?.startsWith(`${this.pid}@`)) || undefined;
      },
      `${this.name} (pid ${this.pid}) polling ${taskQueue}`,
      120_000,
      100,
    );
    return (Date.now() - started) / 1000;
  }

  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM: the graceful stop of a deploy; the worker lets running activities finish. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 40_000);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * Runs `body` while `processes` run: a failure carries their logs, they stop (SIGTERM) when it ends, and whatever ends
 * this process first (a failure exits at once) kills them with it.
 */
export async function whileRunning<T>(processes: ServiceProcess[], body: () => Promise<T>): Promise<T> {
  const killAll = () => processes.forEach((each) => void each.kill());
  process.once('exit', killAll);
  try {
    return await body();
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${processes.map((each) => each.log).join('\n')}`);
  } finally {
    await Promise.all(processes.map((each) => each.stop()));
    process.removeListener('exit', killAll);
  }
}
