import { readFileSync } from 'node:fs';

export interface RunCounts {
  passes: number;
  failures: number;
  pending: number;
}

/** scripts/test.sh: the one `N passed, N failed, N skipped` line of a suite run in several mocha runs. */
const counts: RunCounts[] = process.argv.slice(2).map((file) => JSON.parse(readFileSync(file, 'utf8')) as RunCounts);
const sum = (key: keyof RunCounts) => counts.reduce((total, run) => total + run[key], 0);
console.log(`\n${sum('passes')} passed, ${sum('failures')} failed, ${sum('pending')} skipped`);
