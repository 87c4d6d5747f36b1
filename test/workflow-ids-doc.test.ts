import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * docs/durable-work.md's table of workflow ids ("Finding a workflow in the Temporal UI") against
 * the ids the code builds. The modules that build them are found in the source (a `defineFlow`, or
 * an exported `*_SCHEDULE_ID` / `*ScheduleId`), then loaded from the build, and each id builder is
 * called with an input whose every field is a placeholder: the id it returns is the pattern, with
 * `*` where the doc writes `<name>`.
 */
const ROOT = path.resolve(__dirname, '../..');
const PLACEHOLDER = '\u0001';
const SCHEDULE_ID_EXPORT = /\bexport const (\w*(?:_SCHEDULE_ID|ScheduleId))\s*=/g;
const FLOW_DEFINITION = /\bdefineFlow\s*[<(]/g;

/** An input answering every field with the placeholder; `has` decides what an `'x' in input` test sees. */
const placeholderInput = (has: boolean) => new Proxy({}, { get: () => PLACEHOLDER, has: () => has });
const pattern = (id: string) => id.split(PLACEHOLDER).join('*');

interface Flowlike {
  workflowType: string;
  workflowId: (input: unknown) => string;
}
const isFlow = (value: unknown): value is Flowlike =>
  typeof value === 'object' && value !== null && typeof (value as Flowlike).workflowType === 'string' && typeof (value as Flowlike).workflowId === 'function';

/** Every workflow id pattern the code builds, each with where it comes from; a Schedule's runs are its id and `-<time>`. */
function codePatterns(): Map<string, string> {
  const found = new Map<string, string>();
  const sources = readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'));
  for (const name of sources) {
    const text = readFileSync(path.join(ROOT, 'src', name), 'utf8');
    const flowCount = [...text.matchAll(FLOW_DEFINITION)].length - (name.endsWith(path.join('temporal', 'flow.ts')) ? 1 : 0);
    const scheduleIds = [...text.matchAll(SCHEDULE_ID_EXPORT)].map((match) => match[1]!);
    if (flowCount === 0 && scheduleIds.length === 0) continue;
    const file = `src/${name.split(path.sep).join('/')}`;
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the built module of a source file found above
    const loaded = require(path.join(__dirname, '../src', name.replace(/\.ts$/, '.js'))) as Record<string, unknown>;
    const flows = Object.values(loaded).filter(isFlow);
    assert.equal(flows.length, flowCount, `${file}: every flow it defines is exported (${flowCount} defineFlow, ${flows.length} exported)`);
    for (const flow of flows) {
      // Both sides of an `'x' in input` choice (the consolidation Schedule's tick or sync).
      for (const has of [false, true]) found.set(pattern(flow.workflowId(placeholderInput(has))), `${file} (${flow.workflowType})`);
    }
    for (const exported of scheduleIds) {
      const scheduleId = loaded[exported];
      const id = typeof scheduleId === 'function' ? (scheduleId as (...args: string[]) => string)(...Array.from({ length: scheduleId.length }, () => PLACEHOLDER)) : scheduleId;
      assert.equal(typeof id, 'string', `${file}: ${exported}`);
      found.set(`${pattern(id as string)}-*`, `${file} (${exported}, a Schedule's run)`);
    }
  }
  return found;
}

/** The workflow ids of the doc's table, `<name>` as `*`. */
function documentedPatterns(): string[] {
  const doc = readFileSync(path.join(ROOT, 'docs/durable-work.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Finding a workflow in the Temporal UI'));
  const table = section.slice(0, section.indexOf('\n\n', section.indexOf('| Kind | Workflow id |')));
  return [...table.matchAll(/^\|[^|]+\|\s*`([^`]+)`\s*\|/gm)].map((match) => match[1]!.replace(/<[^>]+>/g, '*'));
}

describe('docs/durable-work.md lists every workflow id', () => {
  const code = codePatterns();
  const documented = documentedPatterns();
  // A flow started only by its Schedule builds its Schedule's id; its runs are that id and the time.
  const isDocumented = (id: string) => documented.includes(id) || documented.includes(`${id}-*`);

  it('finds the flows and Schedules in the code and the table in the doc', () => {
    assert.ok(code.size >= 25, `${code.size} workflow ids found in src/`);
    assert.ok(documented.length >= 25, `${documented.length} rows found in the doc's table`);
  });

  it('has a row for every workflow id the code builds', () => {
    const missing = [...code].filter(([id]) => !isDocumented(id)).map(([id, from]) => `${id}  from ${from}`);
    assert.deepEqual(missing, [], 'add these to the table in docs/durable-work.md ("Finding a workflow in the Temporal UI")');
  });

  it('names no workflow id the code no longer builds', () => {
    const stale = documented.filter((id) => !code.has(id) && !(id.endsWith('-*') && code.has(id.slice(0, -2))));
    assert.deepEqual(stale, [], 'remove or correct these rows of docs/durable-work.md');
  });
});
