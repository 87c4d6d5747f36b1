import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { scalingTables, withScalingTables, type ScalingResult } from './scaling-doc';
import { latestOfEach, readResults, resultsTable, withTable } from './table';

/**
 * Without arguments (the end of `npm run bench`): prints every ratio the benchmarks of this run wrote
 * (bench/results/*.json of the run that started at BENCH_STARTED_AT). With `--readme` (`npm run
 * bench:table`): rewrites bench/README.md's generated table from the newest result of each benchmark, and
 * docs/scaling.md's tables from the newest scaling result.
 */
async function main() {
  const results = await readResults();
  if (process.argv.includes('--readme')) {
    const readmePath = path.resolve(__dirname, '../../bench/README.md');
    await writeFile(readmePath, withTable(await readFile(readmePath, 'utf8'), resultsTable(results)));
    console.log(`bench/README.md: table written from ${results.length} result files`);
    const scaling = latestOfEach(results).find((result) => result.name === 'scaling');
    if (scaling) {
      const docPath = path.resolve(__dirname, '../../docs/scaling.md');
      await writeFile(docPath, withScalingTables(await readFile(docPath, 'utf8'), scalingTables(scaling as ScalingResult)));
      console.log(`docs/scaling.md: tables written from ${scaling.file}`);
    }
    return;
  }
  const startedAt = new Date(Number(process.env.BENCH_STARTED_AT ?? 0) * 1000).toISOString();
  const rows = results
    .filter((result) => result.run >= startedAt)
    .flatMap((result) =>
      result.ratios.map((ratio) => ({
        benchmark: result.name,
        ratio: ratio.name,
        value: ratio.value.toFixed(3),
        goal: ratio.goal === undefined ? '' : String(ratio.goal),
        met: ratio.goal === undefined ? '' : ratio.value >= ratio.goal ? 'yes' : 'no',
      })),
    );
  console.log('\n## Summary of this run');
  console.table(rows);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
