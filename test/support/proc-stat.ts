import { readdirSync, readFileSync } from 'node:fs';

/** Linux's clock tick (CLK_TCK, 100 a second): the unit of /proc's CPU times. */
export const TICK_MS = 10;

/** What /proc/<pid>/stat says of a process (or /proc/<pid>/task/<tid>/stat of a thread); proc(5). */
export interface ProcStat {
  /** The command name (comm), at most 15 characters. */
  command: string;
  /** R, S, D, Z (a zombie: it has ended), … */
  state: string;
  ppid: number;
  /** utime + stime, in clock ticks. */
  cpuTicks: number;
  /** cutime + cstime: the CPU of the children it has reaped, in clock ticks. */
  reapedTicks: number;
  /** When it started, in clock ticks since boot: with the pid, it names one process (a pid is taken again once its own ends). */
  startTime: string;
}

/** One stat file read, or undefined when the process (or thread) ended between its listing and the read. */
export function readProcStat(file: string): ProcStat | undefined {
  let stat: string;
  try {
    stat = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses, so the fields are read after its last ')'.
  const close = stat.lastIndexOf(')');
  const fields = stat.slice(close + 2).split(' ');
  return {
    command: stat.slice(stat.indexOf('(') + 1, close),
    state: fields[0]!,
    ppid: Number(fields[1]),
    cpuTicks: Number(fields[11]) + Number(fields[12]),
    reapedTicks: Number(fields[13]) + Number(fields[14]),
    startTime: fields[19]!,
  };
}

/** The stat of a process, by pid. */
export const processStat = (pid: number | string): ProcStat | undefined => readProcStat(`/proc/${pid}/stat`);

/** The pids /proc lists now. */
export const processIds = (): string[] => readdirSync('/proc').filter((entry) => /^\d+$/.test(entry));

/** The processes below `root` (children, theirs, …), parents before their children. */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const pid of processIds()) {
    const stat = processStat(pid);
    if (stat) children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), Number(pid)]);
  }
  const found: number[] = [];
  for (let queue = [root]; queue.length > 0; ) {
    const next = children.get(queue.shift()!) ?? [];
    found.push(...next);
    queue.push(...next);
  }
  return found;
}

/**
 * The machine's CPU so far, in clock ticks, from /proc/stat's first line: busy (user, nice, system, irq, softirq) and
 * idle (idle, iowait). Steal (a hypervisor's) is neither: no process here ran in it; guest is inside user already.
 */
export function machineTicks(): { busy: number; idle: number } {
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  return { busy: user + nice + system + irq + softirq, idle: idle + iowait };
}
