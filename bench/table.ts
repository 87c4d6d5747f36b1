import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { freshnessOf, type Freshness, type MeasuredCode } from './measured-code';
import { RESULTS_DIR, type Ratio } from './support';

/** One committed result file (bench/support.ts report). */
export interface BenchResult {
  name: string;
  date: string;
  run: string;
  /** The commit measured (`+changes` when the tree differed from it); absent from results before 29 November 2026. */
  commit?: string | null;
  /** The digests of the code it measured (bench/measured-code.ts); absent from results before 30 November 2026. */
  code?: MeasuredCode;
  machine: { cores: number; node: string; load_average: number[] };
  settings: { seconds: number; connections: number; rounds: number; log_level: string; database: Record<string, string> | string; machine_shared: string };
  ratios: Ratio[];
  /** The benchmark's own settings (flows, memory), when it has any. */
  seconds?: number;
  file: string;
}

export const TABLE_START = '<!-- bench-table: written by `npm run bench:table` from bench/results/*.json; edit those, not this -->';
export const TABLE_END = '<!-- bench-table end -->';

/** Every result in bench/results, oldest run first. */
export async function readResults(dir = RESULTS_DIR): Promise<BenchResult[]> {
  const files = (await readdir(dir).catch(() => [] as string[])).filter((name) => name.endsWith('.json')).sort();
  return Promise.all(files.map(async (file) => ({ ...(JSON.parse(await readFile(path.join(dir, file), 'utf8')) as BenchResult), file })));
}

/** The newest run of each benchmark, in the order of their names. */
export function latestOfEach(results: BenchResult[]): BenchResult[] {
  const latest = new Map<string, BenchResult>();
  for (const result of results) if (!latest.has(result.name) || latest.get(result.name)!.run <= result.run) latest.set(result.name, result);
  return [...latest.values()].sort((a, b) => a.name.localeCompare(b.name));
}

const durability = (database: BenchResult['settings']['database']) =>
  typeof database === 'string' ? database : Object.entries(database).map(([name, value]) => `${name} ${value}`).join(', ');

/** How the table marks a result's rows (bench/measured-code.ts). */
const VERDICT: Record<Freshness['verdict'], string> = { current: 'current', stale: '**stale**', unknown: 'unknown' };

/** A result's freshness as the sources list says it. */
export const freshnessLine = (freshness: Freshness): string => `${freshness.verdict}: ${freshness.why}`;

/**
 * The README's table: every ratio of the newest run of each benchmark, its goal, whether the code and Node
 * it measured are still the current ones (`judge`), and where it comes from.
 */
export function resultsTable(results: BenchResult[], judge: (result: BenchResult) => Freshness = freshnessOf): string {
  const lines = ['| benchmark | ratio | value | goal | met | measured |', '|---|---|---|---|---|---|'];
  const sources: string[] = [];
  for (const result of latestOfEach(results)) {
    const freshness = judge(result);
    for (const ratio of result.ratios) {
      const met = ratio.goal === undefined ? '' : ratio.value >= ratio.goal ? 'yes' : '**no**';
      lines.push(`| ${result.name} | ${ratio.name} | ${ratio.value.toFixed(3)} | ${ratio.goal ?? ''} | ${met} | ${VERDICT[freshness.verdict]} |`);
    }
    const { settings, machine } = result;
    sources.push(
      `- ${result.name}: [\`${result.file}\`](results/${result.file}), ${result.date.slice(0, 16).replace('T', ' ')} UTC, commit ${result.commit ?? 'not recorded'}; ${freshnessLine(freshness)}; ${machine.cores} cores, node ${machine.node}, ` +
        `load average ${machine.load_average.map((value) => value.toFixed(1)).join(' ')} at the end; ${settings.rounds} rounds of ${result.seconds ?? settings.seconds} s; ` +
        `PostgreSQL ${durability(settings.database)}; LOG_LEVEL ${settings.log_level}; machine shared: ${settings.machine_shared}`,
    );
  }
  return [TABLE_START, '', ...lines, '', ...sources, '', TABLE_END].join('\n');
}

/** The README with its generated section replaced by `table`. */
export function withTable(readme: string, table: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`bench/README.md has no section between "${TABLE_START}" and "${TABLE_END}"`);
  return readme.slice(0, start) + table + readme.slice(end + TABLE_END.length);
}
