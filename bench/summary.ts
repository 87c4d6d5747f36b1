import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Ratio } from './support';

/** Prints every ratio the benchmarks of this run wrote (bench/results/*.json newer than BENCH_STARTED_AT). */
async function main() {
  const dir = path.resolve(__dirname, '../../bench/results');
  const startedAt = Number(process.env.BENCH_STARTED_AT ?? 0) * 1000;
  const rows: { benchmark: string; ratio: string; value: string; goal: string; met: string }[] = [];
  for (const file of (await readdir(dir)).filter((name) => name.endsWith('.json')).sort()) {
    const result = JSON.parse(await readFile(path.join(dir, file), 'utf8')) as { name: string; date: string; ratios: Ratio[] };
    if (new Date(result.date).getTime() < startedAt) continue;
    for (const ratio of result.ratios) {
      rows.push({
        benchmark: result.name,
        ratio: ratio.name,
        value: ratio.value.toFixed(3),
        goal: ratio.goal === undefined ? '' : String(ratio.goal),
        met: ratio.goal === undefined ? '' : ratio.value >= ratio.goal ? 'yes' : 'no',
      });
    }
  }
  console.log('\n## Summary of this run');
  console.table(rows);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
