import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

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
const TICKS_PER_SECOND = 100; // USER_HZ, 100 on every Linux Node supports
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
/** The machine's CPU so far: user, nice, system, irq and softirq of /proc/stat's first line (not idle, iowait or steal). */
const machineTicks = () => {
  const [user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  return user! + nice! + system! + irq! + softirq!;
};
const startedTicks = machineTicks();
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
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || pid === self) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    // After the command's closing parenthesis: state is field 3, utime 14, stime 15, starttime 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const key = `${pid}:${fields[19]}`;
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
  writeFileSync(out, JSON.stringify({ machine_cpu_seconds: Math.round((machineTicks() - startedTicks) / TICKS_PER_SECOND), programs }));
  process.exit(0);
});
