import { readdirSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, fork } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import type autocannon from 'autocannon';
import type Koa from 'koa';
import pg from 'pg';
import pino from 'pino';
import { createLogger, type Logger } from '../src/logger';
import { machineTicks, processIds, readProcStat, TICK_MS } from '../test/support/proc-stat';
import { measuredPaths, worktreeDigests } from './measured-code';

/**
 * What every benchmark shares: its duration and concurrency settings, an HTTP measurement with
 * autocannon, and the result file that `npm run bench` summarizes. A benchmark always measures its
 * baseline in the same run, on the same machine, and reports the ratio: absolute numbers move with
 * the machine, the ratio is what to compare between runs.
 */
export const BENCH_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
export const BENCH_CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
/** How many times each target is measured, its baseline alternating with it (A, B, A, B…); ratios are of the medians. */
export const BENCH_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/**
 * The service's logger as `npm start` runs it: LOG_LEVEL's level (info unless set) as JSON lines to a file
 * (scripts/start.sh sends each process's output to one; here BENCH_LOG_FILE, which scripts/bench.sh sets),
 * so that the cost of the access log and the workers' lines is in every figure.
 */
export function serviceLogger(level: string): Logger {
  const file = process.env.BENCH_LOG_FILE ?? path.join(os.tmpdir(), `custody-bench-${process.pid}.log`);
  return createLogger(level, undefined, pino.destination({ dest: file, mkdir: true }));
}

/** Measures every target once per round, in the same order each round, so that a disturbance falls on all of them alike. */
export async function alternate<T extends object>(targets: { target: string; measure: (round: number) => Promise<T> }[], rounds = BENCH_ROUNDS): Promise<(T & { round: number })[]> {
  const rows: (T & { round: number })[] = [];
  for (let round = 1; round <= rounds; round += 1) {
    for (const { target, measure } of targets) {
      const row = { ...(await measure(round)), round };
      console.log(`${target} (round ${round}): ${JSON.stringify(row)}`);
      rows.push(row);
    }
  }
  return rows;
}

/** Runs `work` and adds its wall time, in ms, to `add` (however it ends). */
export async function timed<T>(work: () => Promise<T>, add: (ms: number) => void): Promise<T> {
  const at = performance.now();
  try {
    return await work();
  } finally {
    add(performance.now() - at);
  }
}

export const median = (values: number[]): number => {
  if (!values.length) throw new Error('the median of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** The median over rounds of one field of one target's rows. */
export const medianOf = <T extends { target: string }>(rows: T[], target: string, field: keyof T & string): number =>
  median(rows.filter((row) => row.target === target).map((row) => Number(row[field])));

export interface HttpMeasurement {
  target: string;
  connections: number;
  requests_per_second: number;
  latency_p50_ms: number;
  latency_p99_ms: number;
  /** With `serverCpu`: the server's CPU time (user + system) per request of the measured run, in µs. */
  server_cpu_us_per_request?: number;
}

/**
 * Requests per second and latency of one target after a 2 s warm-up; any non-2xx answer fails the benchmark.
 * With uniqueBody, every request sends a body of its own: the template with each `[<unique>]` replaced by a
 * fresh UUID (unique references for creates). autocannon's idReplacement is not used for that: it sends a
 * Content-Length that assumes ids of a fixed length.
 * With serverCpu, the row also has the server's CPU per request: this process's (`true`, a server in this process)
 * or the process's of that pid (Linux's /proc). On a shared machine it moves far less than throughput does, and
 * throughput on an idle one follows it.
 */
export async function measureHttp(
  target: string,
  url: string,
  options: { headers?: Record<string, string>; connections?: number; seconds?: number; method?: 'GET' | 'POST'; body?: string; uniqueBody?: string; serverCpu?: boolean | number } = {},
): Promise<HttpMeasurement> {
  const connections = options.connections ?? BENCH_CONNECTIONS;
  const request = { url, connections, headers: options.headers ?? {}, method: options.method ?? 'GET', body: options.body, uniqueBody: options.uniqueBody };
  await load({ ...request, duration: 2 });
  const serverPid = options.serverCpu;
  const cpuUs = typeof serverPid === 'number' ? () => processCpuMs(serverPid) * 1000 : () => {
    const { user, system } = process.cpuUsage();
    return user + system;
  };
  const cpuBefore = cpuUs();
  const result = await load({ ...request, duration: options.seconds ?? BENCH_SECONDS });
  const cpu = cpuUs() - cpuBefore;
  if (result.non2xx || result.errors || result.timeouts || !result['2xx']) {
    throw new Error(`${target}: ${result['2xx']} 2xx answers, ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  const measurement = { target, connections, requests_per_second: result.requests.average, latency_p50_ms: result.latency.p50, latency_p99_ms: result.latency.p99 };
  if (!options.serverCpu) return measurement;
  return { ...measurement, server_cpu_us_per_request: Math.round(cpu / result.requests.total) };
}

/** Linux's clock tick (USER_HZ), in which /proc reports CPU time: 100 on every architecture Node runs on. */
/** CPU time so far, in ms, by where it was spent on this machine (see `cpuSpentSince`). */
export type CpuSnapshot = Record<string, number>;

/** A process's (or thread's) CPU from its stat file, in ms: its own (utime + stime) and its reaped children's; its command and parent. */
function readStat(file: string): { name: string; ppid: number; ms: number; reapedMs: number } | undefined {
  const stat = readProcStat(file);
  return stat && { name: stat.command, ppid: stat.ppid, ms: stat.cpuTicks * TICK_MS, reapedMs: stat.reapedTicks * TICK_MS };
}

/** The CPU time a running process (all its threads) has used so far, in ms (Linux's /proc). */
export function processCpuMs(pid: number): number {
  const stat = readStat(`/proc/${pid}/stat`);
  if (!stat) throw new Error(`no process ${pid} to read the CPU of`);
  return stat.ms;
}

/**
 * Where the machine's CPU has gone so far (Linux's /proc; undefined elsewhere): this process's main
 * thread (the API, the activities, the benchmark's own client), its other threads (V8's garbage
 * collection helpers, the workflow thread, Temporal's core), the Temporal dev server, PostgreSQL, each
 * process of `processes` (name to pid: a node the benchmark started, a child measuring a baseline), the
 * rest of the machine, and idle.
 */
export function cpuSnapshot(processes: Record<string, number> = {}): CpuSnapshot | undefined {
  if (process.platform !== 'linux') return undefined;
  const snapshot: CpuSnapshot = { service_main_thread: 0, service_other_threads: 0, temporal_server: 0, postgresql: 0, rest_of_machine: 0, idle: 0 };
  const named = new Map(Object.entries(processes).map(([name, pid]) => [String(pid), name]));
  for (const thread of readdirSync('/proc/self/task')) {
    const stat = readStat(`/proc/self/task/${thread}/stat`);
    if (stat) snapshot[thread === String(process.pid) ? 'service_main_thread' : 'service_other_threads']! += stat.ms;
  }
  for (const pid of processIds()) {
    if (pid === String(process.pid)) continue;
    const stat = readStat(`/proc/${pid}/stat`);
    if (stat && named.has(pid)) snapshot[named.get(pid)!] = stat.ms;
    else if (stat?.name.startsWith('temporal')) snapshot.temporal_server! += stat.ms;
    else if (stat?.name.startsWith('postgres')) snapshot.postgresql! += stat.ms;
  }
  const counted = Object.entries(snapshot).reduce((sum, [key, ms]) => (key === 'rest_of_machine' || key === 'idle' ? sum : sum + ms), 0);
  const { total, idle } = machineCpu();
  snapshot.idle = idle;
  snapshot.rest_of_machine = total - idle - counted;
  return snapshot;
}

/** The machine's CPU time so far and the idle part of it, in ms (proc-stat.ts, machineTicks). */
function machineCpu(): { total: number; idle: number } {
  const { busy, idle } = machineTicks();
  return { total: (busy + idle) * TICK_MS, idle: idle * TICK_MS };
}

/**
 * Where the machine's CPU has gone so far, in ms, by group of processes (Linux's /proc): a process counts to a group
 * when its pid, or its parent's, is one of the group's roots — a PostgreSQL server's backends are its postmaster's
 * children, and a backend that ended is in its postmaster's reaped children's time, so a group's sum never goes back;
 * a process's threads are in its own line. This process is `load_generator`, what no group claims `rest_of_machine`.
 */
export function cpuByGroup(roots: Record<string, number[]>): CpuSnapshot {
  const groupOf = new Map<string, string>();
  for (const [group, pids] of Object.entries(roots)) for (const pid of pids) groupOf.set(String(pid), group);
  groupOf.set(String(process.pid), 'load_generator');
  const cpu: CpuSnapshot = Object.fromEntries([...Object.keys(roots), 'load_generator'].map((group) => [group, 0]));
  let counted = 0;
  for (const pid of processIds()) {
    const stat = readStat(`/proc/${pid}/stat`);
    const root = stat && groupOf.get(pid);
    const group = root ?? (stat && groupOf.get(String(stat.ppid)));
    if (!stat || !group) continue;
    const ms = stat.ms + (root ? stat.reapedMs : 0);
    cpu[group]! += ms;
    counted += ms;
  }
  const { total, idle } = machineCpu();
  return { ...cpu, rest_of_machine: total - idle - counted, idle };
}

/**
 * CPU ms per operation since `before`, by where it went (`cpuSnapshot`): what one operation costs the
 * machine, which bounds how many a saturated machine can run. The rest of the machine's share is
 * taken as a difference of totals, so it also carries what processes that ended meanwhile spent.
 */
export function cpuSpentSince(before: CpuSnapshot | undefined, operations: number, processes: Record<string, number> = {}): Record<string, number> | undefined {
  const after = cpuSnapshot(processes);
  if (!before || !after || operations === 0) return undefined;
  return Object.fromEntries(Object.keys(after).map((key) => [key, Number(((after[key]! - (before[key] ?? 0)) / operations).toFixed(2))]));
}

/** autocannon's options, and a body template the child fills per request (functions do not cross to a child). */
export type LoadOptions = autocannon.Options & { uniqueBody?: string };

/** One autocannon run in a child process (bench/load.ts), without the benchmark's node flags (a profile covers the server alone). */
function load(options: LoadOptions): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'load.js'), { execArgv: [] });
    let result: autocannon.Result | undefined;
    child.once('message', (message) => {
      result = message as autocannon.Result;
    });
    child.once('error', reject);
    child.once('exit', (code) => (result ? resolve(result) : reject(new Error(`the load generator exited with ${code}`))));
    child.send(options);
  });
}

/** A setting scripts/bench.sh exports. */
function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run benchmarks with npm run bench (scripts/bench.sh)`);
  return value;
}

/**
 * The environment of the service's own processes (dist/src/server.js, dist/src/worker.js) as
 * scripts/start.sh and the Dockerfile start them, on a task queue of the benchmark's own, logging at
 * LOG_LEVEL (info unless set) as `npm start` does.
 */
export const serviceProcessEnv = (dataDir: string, taskQueue: string): NodeJS.ProcessEnv => ({
  ...process.env,
  NODE_OPTIONS: requiredEnv('SERVICE_NODE_OPTIONS'),
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_TRIM_THRESHOLD_: '131072',
  NODE_ENV: 'development',
  DATA_DIR: dataDir,
  TEMPORAL_TASK_QUEUE: taskQueue,
  // The load is the benchmark's to bound; the per-key limit would only turn part of it into 429s.
  RATE_LIMIT_PER_SECOND: '1000000',
  RATE_LIMIT_BURST: '1000000',
  WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true',
});

export interface Caller {
  (method: string, route: string, body?: unknown): Promise<Record<string, any>>;
}

/** An authenticated JSON call that throws on any non-2xx answer. */
export const callerFor =
  (url: string, secret: string): Caller =>
  async (method, route, body) => {
    const response = await fetch(`${url}${route}`, {
      method,
      headers: { authorization: `Bearer ${secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text.slice(0, 300)}`);
    return text ? (JSON.parse(text) as Record<string, any>) : {};
  };

/** A virtual card's create body (POST /api/cards), the same for every benchmark that needs a card. */
export const BENCH_CARD_BODY = {
  amount: 0,
  card_type: 'virtual',
  currency: 'USD',
  name: 'Benchmark card',
  customer: {
    customer_type: 'individual', first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', phone_number: '5550100', dial_code: '+1',
    date_of_birth: '1990-12-10', id_type: 'passport', id_number: 'P1234567', line1: '1 Main St', city: 'Springfield', state: 'IL', postal_code: '62701', country: 'USA',
  },
};

export const listen = (app: Koa): Promise<Server> =>
  new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server));
  });

export const urlOf = (server: Server): string => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

/** One ratio of a benchmark against its baseline, with the goal the project set for it (higher is better). */
export interface Ratio {
  name: string;
  value: number;
  goal?: number;
}

/** Where the committed results are (bench/results/, one JSON file per benchmark per run). */
export const RESULTS_DIR = path.resolve(__dirname, '../../bench/results');

/** The run's start (scripts/bench.sh exports BENCH_STARTED_AT, in seconds), which names its result files. */
const runStartedAt = () => new Date(Number(process.env.BENCH_STARTED_AT ?? Math.floor(Date.now() / 1000)) * 1000);

/** The durability settings of the benchmark's PostgreSQL, read from the server (npm start runs it with PostgreSQL's defaults: all on). */
async function databaseDurability(): Promise<Record<string, string> | 'no DATABASE_URL'> {
  if (!process.env.DATABASE_URL) return 'no DATABASE_URL';
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    const settings: Record<string, string> = {};
    for (const name of ['fsync', 'synchronous_commit', 'full_page_writes']) settings[name] = (await client.query<Record<string, string>>(`show ${name}`)).rows[0]![name]!;
    return settings;
  } finally {
    await client.end();
  }
}

/** The commit measured, `+changes` when the tree differs from it outside bench/results (null outside a git checkout). */
function measuredCommit(): string | null {
  try {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    const changed = execFileSync('git', ['status', '--porcelain', '--', '.', ':!bench/results'], { encoding: 'utf8' }).trim() !== '';
    return changed ? `${head}+changes` : head;
  } catch {
    return null;
  }
}

/**
 * Prints a benchmark's table and ratios and writes bench/results/<run start>-<name>.json: the date, the
 * commit and the digests of the code measured, the machine (its Node included), the settings (durability read from the database), every round's row, the ratios and `extra`.
 * The README's table is generated from these files (`npm run bench:table`).
 */
export async function report(name: string, rows: object[], ratios: Ratio[], extra: Record<string, unknown> = {}): Promise<void> {
  console.log(`\n## ${name}`);
  console.table(rows);
  for (const ratio of ratios) {
    const goal = ratio.goal === undefined ? '' : ` (goal ${ratio.goal}: ${ratio.value >= ratio.goal ? 'met' : 'not met'})`;
    console.log(`${ratio.name}: ${ratio.value.toFixed(3)}${goal}`);
  }
  const run = runStartedAt();
  const result = {
    name,
    date: new Date().toISOString(),
    run: run.toISOString(),
    commit: measuredCommit(),
    // What `npm run bench:table` compares with the tree of its day to mark the result stale (bench/measured-code.ts).
    code: worktreeDigests(measuredPaths(name)) ?? null,
    machine: { cores: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', memory_mib: Math.round(os.totalmem() / 1024 / 1024), node: process.version, load_average: os.loadavg() },
    settings: {
      seconds: BENCH_SECONDS,
      connections: BENCH_CONNECTIONS,
      rounds: BENCH_ROUNDS,
      log_level: process.env.LOG_LEVEL ?? 'info',
      database: await databaseDurability(),
      machine_shared: process.env.BENCH_MACHINE_SHARED ?? 'not said',
      // The V8 options of the benchmark's process, in which some benchmarks run the service (scripts/bench.sh).
      node_options: process.execArgv.join(' '),
    },
    rows,
    ratios,
    ...extra,
  };
  await mkdir(RESULTS_DIR, { recursive: true });
  await writeFile(path.join(RESULTS_DIR, `${run.toISOString().slice(0, 19).replaceAll(':', '-')}-${name}.json`), `${JSON.stringify(result, null, 2)}\n`);
}

/** Runs a benchmark's main and exits non-zero on failure. */
export function runBenchmark(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}

/**
 * Adds every statement's wait (from its send to its answer, on its connection) to `add` until the
 * returned function is called: pg's Client.query, called with a callback (knex, under MikroORM) or
 * for a promise (the statement pool, src/db/lean.ts).
 */
export function timeStatements(add: (ms: number) => void): () => void {
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const at = performance.now();
    const done = () => add(performance.now() - at);
    const callback = args.findIndex((arg) => typeof arg === 'function');
    if (callback >= 0) {
      const original = args[callback] as (...results: unknown[]) => void;
      args[callback] = (...results: unknown[]) => {
        done();
        original(...results);
      };
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    }
    const result = (query as (...a: unknown[]) => unknown).apply(this, args);
    if (result instanceof Promise) result.then(done, done);
    return result;
  } as typeof query;
  return () => {
    pg.Client.prototype.query = query;
  };
}

/** Thousandths: how result files write seconds and rates. */
export const round = (value: number) => Math.round(value * 1000) / 1000;

/** The CPU a measurement cost, in seconds by where it went (ms from cpuSpentSince). */
export const cpuSeconds = (cpu: Record<string, number> | undefined) => Object.fromEntries(Object.entries(cpu ?? {}).map(([where, ms]) => [`cpu_${where}_s`, round(ms / 1000)]));
