import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { machineTicks, processIds, processStat, TICK_MS } from './proc-stat';

/**
 * Where a whole `npm test` spends the machine's CPU, by program: scripts/test.sh runs this beside the suite, and the
 * summary prints what it wrote. Each second it reads every process's CPU (utime + stime of /proc/<pid>/stat) and keeps
 * the last value it saw per process (pid and start time), so a process is counted up to its last sample: one that
 * lives less than a second may be missed. The machine's own total over the run (/proc/stat) is written beside it,
 * so what no sample caught shows as the difference. On SIGTERM it writes its JSON to the path it was given.
 *
 * The suite is bound by CPU (four mocha processes and their servers on two cores), so this, not the files' times,
 * says what a cut would save (README, "Two commands").
 */
const TICKS_PER_SECOND = 1000 / TICK_MS;
const INTERVAL_MS = 1000;

interface Seen {
  ticks: number;
  /** Its CPU when the census began, for a process already running then: only what it spends during the run counts. */
  before: number;
  program: string;
}

const out = process.argv[2];
if (!out) throw new Error('usage: cpu-census.js OUTPUT.json');

const seen = new Map<string, Seen>();
const startedTicks = machineTicks().busy;
const self = String(process.pid);

/** The program a process runs, as the census groups it: a Node script by its path, a Python tool by its script, else the executable. */
function programOf(pid: string): string | undefined {
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return undefined;
  }
  if (argv.length === 0) return undefined;
  const executable = path.basename(argv[0]!);
  const relative = (file: string) => path.relative(process.cwd(), file).replace(/^(\.\.\/)+/, '');
  if (executable === 'node' || executable.startsWith('node-')) {
    const script = argv.slice(1).find((arg) => /\.(c|m)?js$/.test(arg));
    return `node ${script ? relative(script) : argv.slice(1, 3).join(' ')}`;
  }
  if (executable.startsWith('python')) return `python ${argv.slice(1, 3).map((arg) => path.basename(arg)).join(' ')}`;
  if (executable.startsWith('postgres') || argv[0]!.includes('postgres:')) return 'postgres';
  return `${executable} ${executable === 'temporal' ? (argv[1] ?? '') : ''}`.trim();
}

function sample(first = false): void {
  for (const pid of processIds()) {
    if (pid === self) continue;
    const stat = processStat(pid);
    if (!stat) continue;
    const ticks = stat.cpuTicks;
    const key = `${pid}:${stat.startTime}`;
    const known = seen.get(key);
    if (known) known.ticks = ticks;
    else {
      const program = programOf(pid);
      if (program) seen.set(key, { ticks, before: first ? ticks : 0, program });
    }
  }
}

sample(true);
const timer = setInterval(sample, INTERVAL_MS);
process.once('SIGTERM', () => {
  clearInterval(timer);
  sample();
  const byProgram = new Map<string, number>();
  for (const { ticks, before, program } of seen.values()) byProgram.set(program, (byProgram.get(program) ?? 0) + (ticks - before) / TICKS_PER_SECOND);
  const programs = [...byProgram].filter(([, seconds]) => seconds > 0).sort((a, b) => b[1] - a[1]).map(([program, seconds]) => ({ program, cpu_seconds: Math.round(seconds * 10) / 10 }));
  writeFileSync(out, JSON.stringify({ machine_cpu_seconds: Math.round((machineTicks().busy - startedTicks) / TICKS_PER_SECOND), programs }));
  process.exit(0);
});
