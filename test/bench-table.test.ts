import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { SCALING_END, SCALING_START, scalingTables, type ScalingResult } from '../bench/scaling-doc';
import { latestOfEach, readResults, resultsTable, TABLE_END, TABLE_START } from '../bench/table';

describe('bench/README.md', () => {
  it('has the table `npm run bench:table` writes from the committed results in bench/results/', async () => {
    const results = await readResults();
    assert.ok(results.length > 0, 'bench/results/ holds the committed runs');
    const readme = await readFile(path.resolve(__dirname, '../../bench/README.md'), 'utf8');
    const table = readme.slice(readme.indexOf(TABLE_START), readme.indexOf(TABLE_END) + TABLE_END.length);
    assert.equal(table, resultsTable(results), 'bench/README.md: run `npm run bench:table` after a benchmark run');
  });
});

describe('docs/scaling.md', () => {
  it('has the tables `npm run bench:table` writes from the newest scaling result', async () => {
    const scaling = latestOfEach(await readResults()).find((result) => result.name === 'scaling');
    assert.ok(scaling, 'bench/results/ holds a scaling run (npm run bench scaling)');
    const doc = await readFile(path.resolve(__dirname, '../../docs/scaling.md'), 'utf8');
    const tables = doc.slice(doc.indexOf(SCALING_START), doc.indexOf(SCALING_END) + SCALING_END.length);
    assert.equal(tables, scalingTables(scaling as ScalingResult), 'docs/scaling.md: run `npm run bench:table` after a scaling run');
  });
});
