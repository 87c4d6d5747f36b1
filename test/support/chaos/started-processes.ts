import { readFileSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { descendantsOf, processStat } from '../proc-stat';

/** A process the driver started: its own pid, or (PostgreSQL, started by pg_ctl in a session of its own) a process group. */
export interface StartedProcess {
  name: string;
  pid: number;
  group: boolean;
  /**
   * When it started (clock ticks since boot, /proc/<pid>/stat), read as it was seen to start: a pid is taken again by
   * another process once its own has ended (pid_max is 32768 here, and a busy machine goes round it in minutes), so
   * the pid alone does not say the process still runs, nor that a SIGKILL to it would hit ours.
   */
  startTime?: string;
}

/** A process's start time (/proc/<pid>/stat) while it runs (a zombie has ended), else undefined. */
export function processStartTime(pid: number): string | undefined {
  const stat = processStat(pid);
  return stat && stat.state !== 'Z' ? stat.startTime : undefined;
}

/** Whether the very process the run started still runs: its pid alive with the start time it had (not a pid taken again since). */
export function stillRunning(started: StartedProcess): boolean {
  const now = processStartTime(started.pid);
  return now !== undefined && now === started.startTime;
}

/** SIGKILL to a process or its group; false when there was nothing to kill (ESRCH: gone already). */
export function sigkill(started: Pick<StartedProcess, 'pid' | 'group'>): boolean {
  try {
    process.kill(started.group ? -started.pid : started.pid, 'SIGKILL');
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Every process the chaos driver started and has not seen end, so that none outlives it, whatever ends the
 * driver: its own stop in `finally` stops them gracefully; an exception nothing caught, an unhandled rejection,
 * Ctrl-C or a SIGTERM still reach `exit` (a signal through the handler installed here), where, synchronously
 * (nothing asynchronous runs there), SIGKILL goes to the driver's descendants (a start in progress: the bash of
 * pg_start_cluster or temporal_dev_start and what it spawned), to each process it saw start, and to what a pid file
 * names (a postmaster that a restart in progress launched: pg_ctl puts it in a session of its own); then the run's
 * folder is removed.
 */
export class StartedProcesses {
  /** Every process started during the run, in order: the report's, and what a test checks has ended. */
  readonly all: StartedProcess[] = [];
  private readonly live = new Map<number, StartedProcess>();
  private readonly pidFiles: (Omit<StartedProcess, 'pid'> & { file: string })[] = [];
  private readonly onExit = () => this.killAll();
  private readonly onSignal = (signal: NodeJS.Signals) => {
    this.killAll();
    process.exit(128 + (os.constants.signals[signal] ?? 0));
  };

  constructor(
    private readonly dir: string,
    private readonly log: (line: string) => void,
  ) {
    process.on('exit', this.onExit);
    for (const signal of SIGNALS) process.on(signal, this.onSignal);
  }

  started(name: string, pid: number, group = false): void {
    const started = { name, pid, group, startTime: processStartTime(pid) };
    this.all.push(started);
    this.live.set(pid, started);
    this.log(`${name} started (pid ${pid}${group ? ', its process group' : ''})`);
  }

  /** A process whose pid `file` names whenever it runs (its first line), killed at exit even if its start was not seen to end. */
  watchPidFile(name: string, file: string, group: boolean): void {
    this.pidFiles.push({ name, file, group });
  }

  ended(pid: number): void {
    this.live.delete(pid);
  }

  /** The run is over and everything it started was stopped: the hooks go, so that the process they were installed in lives on as before. */
  release(): void {
    process.off('exit', this.onExit);
    for (const signal of SIGNALS) process.off(signal, this.onSignal);
  }

  private killAll(): void {
    // A pid file outlives a killed postmaster: the pid it names is ours only while that process runs in the file's folder.
    const fromPidFiles = this.pidFiles.flatMap(({ file, group }) => {
      const pid = Number(readIfThere(file).split('\n')[0]);
      return Number.isInteger(pid) && pid > 0 && cwdOf(pid) === realDir(path.dirname(file)) ? [{ pid, group }] : [];
    });
    // A live entry's pid may have been taken by another process since ours ended unseen (a crash): only the same process is killed.
    const live = [...this.live.values()].filter(stillRunning);
    for (const target of [...descendantsOf(process.pid).map((pid) => ({ pid, group: false })), ...live, ...fromPidFiles]) {
      try {
        sigkill(target);
      } catch {
        // EPERM: a pid reused by someone else's process; nothing of ours to kill there.
      }
    }
    this.live.clear();
    // A process killed a moment ago may still be closing files in it.
    rmSync(this.dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
  }
}

function cwdOf(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return undefined;
  }
}

function realDir(dir: string): string | undefined {
  try {
    return realpathSync(dir);
  } catch {
    return undefined;
  }
}

function readIfThere(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
