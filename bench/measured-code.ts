import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The code each benchmark measures, and whether a result still measures it: a result is stale when that
 * code differs now from what it ran (or when it ran on a Node older than the project's), so the README's
 * table never shows a figure of code that is gone as if it were the current code's.
 */

/** The repository's root (this file runs from dist/bench/). */
const ROOT = path.resolve(__dirname, '../..');

/** What every benchmark runs through: the harness, the load generator, the script that starts it, the dependencies. */
const HARNESS = ['bench/support.ts', 'bench/load.ts', 'scripts/bench.sh', 'package-lock.json'];
/** The service as its API and worker run it: a benchmark that drives workflows measures all three. */
const SERVICE = ['src', 'workflows', 'activities'];

/**
 * Per benchmark (its result's name), the paths of the code it measures besides HARNESS: the whole service
 * where it runs the API or the worker (their routes and workers load every module), narrower where the
 * benchmark calls one part of it.
 */
export const MEASURED_CODE: Record<string, string[]> = {
  reads: ['src', 'bench/reads.ts', 'bench/reads-bare.ts'],
  'spend-limits': ['src/cards', 'src/db', 'src/ledger', 'src/shared', 'bench/spend-limits.ts'],
  'policy-evaluation': ['src/policies/evaluator.ts', 'src/policies/schema.ts', 'src/shared', 'bench/policy-evaluation.ts'],
  'lightning-invoices': ['src', 'bench/lightning-invoices.ts', 'test/support/lnd.ts'],
  flows: [...SERVICE, 'bench/flows.ts', 'bench/workflows'],
  'flows-funding': [...SERVICE, 'bench/flows.ts', 'bench/workflows'],
  'worker-restart': [...SERVICE, 'bench/worker-restart.ts', 'test/support/service-process.ts'],
  memory: [...SERVICE, 'bench/memory.ts', 'test/support/service-process.ts', 'test/support/sandbox-organizations.ts', 'test/support/webhook-receiver.ts'],
  reconciliation: ['src', 'bench/reconciliation.ts', 'bench/reconciliation-floor.ts', 'bench/reconciliation-setup.ts', 'test/support/anvil.ts'],
  'solana-scan': ['src', 'bench/solana-scan.ts', 'bench/solana-scan-floor.ts', 'bench/solana-scan-node.ts', 'test/support/solana-node.ts', 'test/support/litesvm.ts'],
  scaling: [...SERVICE, 'bench/scaling.ts', 'bench/scaling-bare-worker.ts', 'bench/workflows', 'test/support/chaos', 'test/support/service-process.ts', 'test/support/temporal-cluster.ts', 'test/support/sandbox-organizations.ts'],
  bursts: [...SERVICE, 'bench/bursts.ts', 'test/support/bursts.ts'],
  'lightning-live': [...SERVICE, 'bench/lightning-live.ts', 'test/support/lnd.ts', 'test/support/service-process.ts'],
  chaos: [...SERVICE, 'bench/chaos.ts', 'test/support/chaos'],
};

/** The paths a benchmark measures; one not listed in MEASURED_CODE counts the whole service and bench/ (never a failure at the end of a long run). */
export const measuredPaths = (name: string): string[] => [...HARNESS, ...(MEASURED_CODE[name] ?? [...SERVICE, 'bench'])];

/** What a result records of the code it ran: each measured path's digest (`pathDigests`). */
export type MeasuredCode = Record<string, string>;

const git = (args: string[], input?: string): string =>
  execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'], maxBuffer: 256 * 1024 * 1024 });

/** One digest of the files under a path: sha256 of their sorted `<blob id> <file>` lines (git's blob ids, so a commit's tree gives the same). */
const digestOf = (lines: string[]): string => createHash('sha256').update(lines.sort().join('\n')).digest('hex').slice(0, 16);

/**
 * Each path's digest as the working tree has it now (tracked and untracked files not ignored, as a commit of
 * the tree would hold them); undefined without git (an export, a Docker build).
 */
export function worktreeDigests(paths: string[]): MeasuredCode | undefined {
  try {
    const digests: MeasuredCode = {};
    for (const measured of paths) {
      const files = [...new Set(git(['ls-files', '--cached', '--others', '--exclude-standard', '-z', '--', measured]).split('\0'))]
        .filter((file) => file && existsSync(path.join(ROOT, file)))
        .sort();
      const blobs = files.length ? git(['hash-object', '--stdin-paths'], `${files.join('\n')}\n`).trim().split('\n') : [];
      digests[measured] = digestOf(files.map((file, index) => `${blobs[index]} ${file}`));
    }
    return digests;
  } catch {
    return undefined;
  }
}

const worktreeNow = new Map<string, string | undefined>();
/** worktreeDigests, each path read once per process: for a table, whose results share most of their paths. */
function cachedWorktreeDigests(paths: string[]): MeasuredCode | undefined {
  for (const measured of paths) if (!worktreeNow.has(measured)) worktreeNow.set(measured, worktreeDigests([measured])?.[measured]);
  if (paths.some((measured) => worktreeNow.get(measured) === undefined)) return undefined;
  return Object.fromEntries(paths.map((measured) => [measured, worktreeNow.get(measured)!]));
}

/** Each path's digest as `commit` had it; undefined when this clone lacks the commit (a shallow clone) or git. */
function commitDigests(commit: string, paths: string[]): MeasuredCode | undefined {
  try {
    const digests: MeasuredCode = {};
    for (const measured of paths) {
      const entries = git(['ls-tree', '-r', '-z', '--full-tree', commit, '--', measured]).split('\0').filter(Boolean);
      digests[measured] = digestOf(
        entries.flatMap((entry) => {
          const [meta, file] = entry.split('\t') as [string, string];
          const [, type, blob] = meta.split(' ');
          return type === 'blob' ? [`${blob} ${file}`] : [];
        }),
      );
    }
    return digests;
  } catch {
    return undefined;
  }
}

/** The oldest Node the project runs on: package.json's `engines.node` (`>=major.minor`). */
function projectNode(): { major: number; minor: number; range: string } {
  const range = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
  const [, major, minor] = /^>=(\d+)\.(\d+)/.exec(range) ?? [];
  if (!major || !minor) throw new Error(`package.json: engines.node "${range}" is not ">=major.minor"`);
  return { major: Number(major), minor: Number(minor), range };
}

/** What the table says of a result: stale, current, or unknown (this clone cannot tell), and why. */
export interface Freshness {
  verdict: 'current' | 'stale' | 'unknown';
  why: string;
  /** False when this checkout could not judge what another could (no git, or a shallow clone lacking the result's commit). */
  judged: boolean;
}

/** What `freshnessOf` reads of a result file. */
export interface MeasuredResult {
  name: string;
  commit?: string | null;
  code?: MeasuredCode;
  machine: { node: string };
}

const short = (commit: string) => commit.slice(0, 7) + (commit.endsWith('+changes') ? '+changes' : '');

/**
 * Whether a result measured the code and the Node there are now. The code: the digests the result recorded
 * (`code`, from the tree it ran, uncommitted changes included), else its commit's tree, against the working
 * tree's now. A `+changes` result without digests is judged by its commit (the changes are not known).
 */
export function freshnessOf(result: MeasuredResult, current: (paths: string[]) => MeasuredCode | undefined = cachedWorktreeDigests): Freshness {
  const reasons: string[] = [];
  const node = projectNode();
  const [major = 0, minor = 0] = result.machine.node.replace(/^v/, '').split('.').map(Number);
  if (major < node.major || (major === node.major && minor < node.minor)) reasons.push(`node ${result.machine.node}, older than the project's ${node.range}`);
  const paths = result.code ? Object.keys(result.code) : measuredPaths(result.name);
  const base = result.commit?.replace(/\+changes$/, '');
  const measured = result.code ?? (base ? commitDigests(base, paths) : undefined);
  const now = current(paths);
  if (!result.code && !base) return verdict(reasons, 'no commit recorded', true);
  if (!measured || !now) return verdict(reasons, now ? `commit ${short(result.commit!)} is not in this clone's history` : 'no git here', false);
  // Which of its paths changed is left to `git diff`: a verdict that stays the same while more code changes keeps the table still.
  if (paths.some((measuredPath) => measured[measuredPath] !== now[measuredPath])) reasons.push(`the code it measures changed since ${result.commit ? short(result.commit) : 'the run'}`);
  return reasons.length ? { verdict: 'stale', why: reasons.join('; '), judged: true } : { verdict: 'current', why: `the code and node it measured are the current ones (${result.commit ? short(result.commit) : 'recorded digests'})`, judged: true };
}

/** A result whose code this checkout cannot compare: stale if its Node already says so, else unknown. */
function verdict(reasons: string[], unknown: string, judged: boolean): Freshness {
  if (reasons.length) return { verdict: 'stale', why: `${reasons.join('; ')} (and ${unknown})`, judged };
  return { verdict: 'unknown', why: unknown, judged };
}
