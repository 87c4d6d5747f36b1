import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { freshnessOf, MEASURED_CODE, type Freshness } from '../bench/measured-code';
import { SCALING_END, SCALING_START, scalingTables, type ScalingResult } from '../bench/scaling-doc';
import { latestOfEach, readResults, resultsTable, TABLE_END, TABLE_START, type BenchResult } from '../bench/table';

const ROOT = path.resolve(__dirname, '../..');

/** Stands for a verdict this checkout cannot reach (see `matchesWhereJudged`). */
const UNJUDGED = '\u0000unjudged\u0000';

/**
 * Freshness as here, except where this checkout cannot judge what the one that wrote the table could (no git,
 * or a shallow clone lacking a result's commit, as a CI clone may be): there the verdict is left open, loudly.
 */
function judgeHere(result: BenchResult): Freshness {
  const freshness = freshnessOf(result);
  if (freshness.judged) return freshness;
  console.warn(`bench tables: ${result.file}: ${freshness.why}; its stale mark is not checked here (a clone with full history checks it)`);
  return { verdict: 'unknown', why: UNJUDGED, judged: false };
}

/** `generated` with every unjudged verdict (its rows' cells, its sources line's reason) free to read anything on its line. */
function matchesWhereJudged(actual: string, generated: string): boolean {
  if (!generated.includes(UNJUDGED)) return actual === generated;
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // The benchmarks whose verdict is open: their sources line (`- name: …`) carries the marker.
  const open = new Set(generated.split('\n').flatMap((line) => (line.includes(UNJUDGED) ? [/^- ([^:]+):/.exec(line)?.[1]] : [])));
  const pattern = generated
    .split('\n')
    .map((line) => {
      if (line.includes(UNJUDGED)) return line.split(`unknown: ${UNJUDGED}`).map(escape).join('[^\\n]*');
      const row = /^\| ([^|]+) \|.* \| unknown \|$/.exec(line);
      return row && open.has(row[1]) ? `${escape(line.slice(0, -'unknown |'.length))}[^\\n]*` : escape(line);
    })
    .join('\n');
  return new RegExp(`^${pattern}$`).test(actual);
}

describe('bench/README.md', () => {
  it('has the table `npm run bench:table` writes from the committed results in bench/results/, stale rows marked', async () => {
    const results = await readResults();
    assert.ok(results.length > 0, 'bench/results/ holds the committed runs');
    const readme = await readFile(path.join(ROOT, 'bench/README.md'), 'utf8');
    const table = readme.slice(readme.indexOf(TABLE_START), readme.indexOf(TABLE_END) + TABLE_END.length);
    const generated = resultsTable(results, judgeHere);
    if (!generated.includes(UNJUDGED)) assert.equal(table, generated, 'bench/README.md: run `npm run bench:table` (after a benchmark run, or a change to code a benchmark measures)');
    else assert.ok(matchesWhereJudged(table, generated), 'bench/README.md: run `npm run bench:table` (after a benchmark run, or a change to code a benchmark measures)');
  });

  it('names the code every benchmark measures, so that a change to it marks the benchmark stale', async () => {
    const script = await readFile(path.join(ROOT, 'scripts/bench.sh'), 'utf8');
    const benches = /^BENCHES=\(([^)]*)\)/m.exec(script)?.[1]?.split(/\s+/).filter(Boolean) ?? [];
    assert.ok(benches.length > 0, 'scripts/bench.sh lists its benchmarks in BENCHES=(…)');
    const named = new Set([...benches, ...(await readResults()).map((result) => result.name)]);
    for (const name of named) assert.ok(MEASURED_CODE[name], `bench/measured-code.ts: MEASURED_CODE names no code for the benchmark ${name}`);
  });
});

describe('docs/scaling.md', () => {
  it('has the tables `npm run bench:table` writes from the newest scaling result', async () => {
    const scaling = latestOfEach(await readResults()).find((result) => result.name === 'scaling');
    assert.ok(scaling, 'bench/results/ holds a scaling run (npm run bench scaling)');
    const doc = await readFile(path.join(ROOT, 'docs/scaling.md'), 'utf8');
    const tables = doc.slice(doc.indexOf(SCALING_START), doc.indexOf(SCALING_END) + SCALING_END.length);
    const generated = scalingTables(scaling as ScalingResult, judgeHere(scaling));
    assert.ok(matchesWhereJudged(tables, generated), 'docs/scaling.md: run `npm run bench:table` (after a scaling run, or a change to code it measures)');
  });
});
