import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Static checks of two rules of docs/durable-work.md over the source tree (the .ts files, not the
 * build): workflows are started and messaged only through the starter, and only the HTTP layer's
 * own edges (routes files, system, server wiring) import src/http/. And floors: domains that once asked
 * each other back (transactions and gas stations) import each other in one direction at most.
 */
const ROOT = path.resolve(__dirname, '../..');
const SOURCE_DIRS = ['src', 'activities', 'workflows'];

interface SourceFile {
  /** Relative to the repository root, with forward slashes. */
  file: string;
  /** The text with comments blanked (line numbers kept), so a comment naming a call is no offence. */
  code: string;
}

function sourceFiles(): SourceFile[] {
  return SOURCE_DIRS.flatMap((dir) =>
    readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts'))
      .map((name) => {
        const file = path.posix.join(dir, name.split(path.sep).join('/'));
        return { file, code: withoutComments(readFileSync(path.join(ROOT, file), 'utf8')) };
      }),
  );
}

function withoutComments(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, (comment) => comment.replace(/[^\n]/g, ' '))
    .replace(/^\s*\/\/.*$/gm, '');
}

const lineOf = (code: string, index: number) => code.slice(0, index).split('\n').length;

/** `file:line  match` for every match of any of the patterns. */
function offences(files: SourceFile[], patterns: RegExp[]): string[] {
  return files.flatMap(({ file, code }) =>
    patterns.flatMap((pattern) =>
      [...code.matchAll(new RegExp(pattern.source, 'g'))].map((match) => `${file}:${lineOf(code, match.index)}  ${match[0].replace(/\s+/g, '')}`),
    ),
  );
}

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)['"]([^'"]+)['"]/g;

/** `file:line  imports <specifier>` for each relative import of `files` whose target (a path from the root, no extension) `into` accepts. */
function importsInto(files: SourceFile[], into: (target: string) => boolean): string[] {
  return files.flatMap(({ file, code }) =>
    [...code.matchAll(IMPORT)]
      .filter((match) => match[1]!.startsWith('.') && into(path.posix.normalize(path.posix.join(path.posix.dirname(file), match[1]!))))
      .map((match) => `${file}:${lineOf(code, match.index)}  imports ${match[1]}`),
  );
}

const under = (dir: string) => (file: string) => file === dir || file.startsWith(`${dir}/`);

function assertNone(found: string[], rule: string): void {
  if (found.length) assert.fail(`${rule}:\n  ${[...new Set(found)].sort().join('\n  ')}`);
}

describe('Architecture', () => {
  const files = sourceFiles();

  it('starts and messages workflows only through the WorkflowStarter (src/temporal/starter.ts)', () => {
    const temporalCalls = [
      /\bworkflow\s*\.\s*(start|execute)\s*\(/,
      /\b(signalWithStart|executeUpdateWithStart)\s*\(/,
      // Schedule handles (src/temporal/setup.ts) are not workflow handles.
      /(?<!schedule\s*)\.\s*getHandle\s*\(/,
      /\bdeps\s*\.\s*temporal\s*\.\s*client\b/,
    ];
    const activityClient = /\bContext\s*\.\s*current\s*\(\s*\)\s*\.\s*client\b/;
    assertNone(
      [
        ...offences(
          files.filter(({ file }) => file !== 'src/temporal/starter.ts'),
          temporalCalls,
        ),
        // An activity's starter is built on its own context's client, in this one file.
        ...offences(
          files.filter(({ file }) => file !== 'src/temporal/starter.ts' && file !== 'activities/with-starts.ts'),
          [activityClient],
        ),
      ],
      'Temporal client calls outside src/temporal/starter.ts (record a start with recordStart, message a workflow through WorkflowStarter)',
    );
  });

  it('keeps the HTTP layer out of services, entities, flows, providers, workflows and activities', () => {
    const mayImportHttp = (file: string) =>
      /^src\/(http|system)\//.test(file) || /^src\/[a-z-]+\/([a-z-]+-)?routes\.ts$/.test(file) || ['src/server.ts', 'src/modules.ts', 'src/runtime.ts'].includes(file);
    const found = importsInto(
      files.filter(({ file }) => !mayImportHttp(file)),
      under('src/http'),
    );
    assertNone(found, 'HTTP layer imported outside src/http, src/system, a domain routes.ts (or NAME-routes.ts), server.ts, modules.ts and runtime.ts (throw shared/errors, take plain inputs)');
  });

  // Domains that asked each other back: a payout refund's path visited the send service five times (docs/architecture).
  for (const [one, other] of [['src/transactions', 'src/gas-stations']] as const) {
    it(`has no import cycle between ${one} and ${other}: at most one imports the other`, () => {
      const forth = importsInto(files.filter(({ file }) => under(one)(file)), under(other));
      const back = importsInto(files.filter(({ file }) => under(other)(file)), under(one));
      if (forth.length && back.length) {
        assert.fail(`${one} and ${other} import each other (move what both need below both, as src/movements/funding.ts does):\n  ${[...forth, ...back].sort().join('\n  ')}`);
      }
    });
  }

  it('keeps the ledger a floor of its own: src/ledger imports only the kit\'s statement helpers (src/db/lean.ts) and src/shared', () => {
    const found = importsInto(
      files.filter(({ file }) => under('src/ledger')(file)),
      (target) => !under('src/ledger')(target) && !under('src/shared')(target) && target !== 'src/db/lean',
    );
    assertNone(found, 'the ledger sits below every domain that moves value: it names accounts by plain ids and leaves each projection check to its domain (src/modules.ts ledgerProjections)');
  });
});
