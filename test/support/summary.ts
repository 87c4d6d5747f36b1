import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export interface RunCounts {
  passes: number;
  failures: number;
  pending: number;
}

/**
 * scripts/test.sh: the slowest files of the run (test/support/environment.ts records each file's time in
 * TEST_ARTIFACTS_DIR), then the one `N passed, N failed, N skipped` line of a suite run in several mocha runs.
 */
const artifactsDir = process.env.TEST_ARTIFACTS_DIR;
const times = (artifactsDir ? readdirSync(artifactsDir).filter((name) => name.startsWith('times-')) : [])
  .flatMap((name) => readFileSync(path.join(artifactsDir!, name), 'utf8').trim().split('\n'))
  .map((line) => JSON.parse(line) as { file: string; seconds: number; cpu_seconds: number })
  .sort((a, b) => b.seconds - a.seconds);
if (times.length > 0) {
  const column = (seconds: number) => `${seconds.toFixed(1).padStart(6)} s`;
  console.log('\nThe slowest files (time, and the CPU their process spent meanwhile):');
  for (const { file, seconds, cpu_seconds } of times.slice(0, 10)) console.log(`  ${column(seconds)} ${column(cpu_seconds)}  ${file}`);
  const cpu = times.reduce((sum, time) => sum + time.cpu_seconds, 0);
  console.log(`CPU of the test processes over all ${times.length} files: ${cpu.toFixed(0)} s (servers and nodes they started not counted)`);
}
// Where the machine's CPU went over the run, by program (test/support/cpu-census.ts).
const census = process.env.TEST_CPU_CENSUS_FILE;
if (census && existsSync(census)) {
  const { machine_cpu_seconds, programs } = JSON.parse(readFileSync(census, 'utf8')) as { machine_cpu_seconds: number; programs: { program: string; cpu_seconds: number }[] };
  const counted = programs.reduce((sum, { cpu_seconds }) => sum + cpu_seconds, 0);
  console.log(`\nThe machine's CPU over the suite: ${machine_cpu_seconds} s, ${counted.toFixed(0)} s of it seen by program (sampled each second; a process of under a second may be missed):`);
  for (const { program, cpu_seconds } of programs.slice(0, 15)) console.log(`  ${cpu_seconds.toFixed(1).padStart(7)} s  ${program}`);
}
const counts: RunCounts[] = process.argv.slice(2).map((file) => JSON.parse(readFileSync(file, 'utf8')) as RunCounts);
const sum = (key: keyof RunCounts) => counts.reduce((total, run) => total + run[key], 0);
console.log(`\n${sum('passes')} passed, ${sum('failures')} failed, ${sum('pending')} skipped`);
