import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WorkflowNotFoundError } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, makeTelemetryFilterString, Runtime } from '@temporalio/worker';
import pg from 'pg';
import { loadConfig, type Config } from '../../src/config';
import { createOrm, migrate, type Orm } from '../../src/db/orm';
import { ledgerBreaks } from '../../src/monitoring/ledger-invariants';
import { ledgerProjections } from '../../src/registries';
import { SEARCH_ATTRIBUTE_KEYS } from '../../src/temporal/search-attributes';
import { watchNodeCallsInTransactions } from './node-calls';
import { watchPoolWaits } from './pool-waits';
import { freeLoopbackPort } from './ports';
import { TemporalCluster } from './temporal-cluster';

/**
 * Shared, lazily started real components of this test process: a migrated PostgreSQL database of its
 * own, one Temporal dev server for API tests, one time-skipping server per test file for workflow
 * tests. scripts/test.sh runs several processes (mocha's parallel mode), each taking files one by one;
 * within a process each test works inside its own organization, so tests do not see each other.
 */
// Workers log their state changes at INFO, and the SDK core warns that the time-skipping server lacks
// newer capabilities; tests only want what goes wrong.
Runtime.install({
  // ERROR, not WARN: tests that keep a provider down on purpose make the SDK warn of every failed activity attempt.
  logger: new DefaultLogger('ERROR'),
  telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR', other: 'ERROR' }), forward: {} } },
});

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the suite with \`npm test\`, which provisions it.`);
  return value;
}

/**
 * The suite's master key: a key of its own, not the public development key, so live keys work (they answer 503
 * key_custody_unconfigured under the development key). Set in the environment, like DATABASE_URL below, so that the
 * apps, workers and child processes of this process all seal and open with it. Public like every test fixture.
 */
export const TEST_MASTER_KEY = createHash('sha256').update('custody-platform test suite master key').digest('hex');
process.env.MASTER_KEY ??= TEST_MASTER_KEY;

/**
 * Loopback webhook targets on: the suite's receivers (test/support/webhook-receiver.ts) listen on 127.0.0.1. An
 * override of undefined unsets a variable (`MASTER_KEY: undefined`: the development master key).
 */
export function testConfig(overrides: Record<string, string | undefined> = {}): Config {
  // Sends and sponsorships checked every second: a test waits for the chain, not for the next check.
  return loadConfig({ LOG_LEVEL: 'silent', NODE_ENV: 'test', WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true', CHAIN_CHECK_SECONDS: '1', ...process.env, ...overrides });
}

/**
 * The database of this process: `<database>_p<pid>` beside the one scripts/test.sh made (that one is
 * only where it is created from). Set before any test reads the environment, so the apps, workers and
 * child processes of this process all use it; scripts/test.sh drops them all at the end.
 */
// Kept apart: mocha's main process loads this file too, and its workers inherit its environment.
const sharedDatabaseUrl = process.env.TEST_SHARED_DATABASE_URL ?? requiredEnv('DATABASE_URL');
process.env.TEST_SHARED_DATABASE_URL = sharedDatabaseUrl;
const databaseUrl = (name: string) => Object.assign(new URL(sharedDatabaseUrl), { pathname: `/${name}` }).toString();
const processDatabasePrefix = `${new URL(sharedDatabaseUrl).pathname.slice(1)}_p`;
const processDatabase = `${processDatabasePrefix}${process.pid}`;
process.env.DATABASE_URL = databaseUrl(processDatabase);

/** One statement on the shared database, where the process databases are made and listed. */
async function onSharedDatabase<Row extends pg.QueryResultRow>(sql: string, values: unknown[]): Promise<Row[]> {
  const client = new pg.Client({ connectionString: sharedDatabaseUrl });
  await client.connect();
  try {
    return (await client.query<Row>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

async function createProcessDatabase(): Promise<void> {
  const existing = await onSharedDatabase('select 1 from pg_database where datname = $1', [processDatabase]);
  if (existing.length === 0) await onSharedDatabase(`create database "${processDatabase}"`, []);
}

/**
 * A migrated database of a test's own beside this process's (named after it, so the secret scan reads it and
 * scripts/test.sh drops it): for what must see no other test's rows, such as rows sealed under other keys.
 */
export async function ownDatabase(label: string): Promise<{ url: string; orm: Orm; drop: () => Promise<void> }> {
  const name = `${processDatabase}_${label}`;
  await onSharedDatabase(`drop database if exists "${name}" with (force)`, []);
  await onSharedDatabase(`create database "${name}"`, []);
  const orm = await createOrm(databaseUrl(name), 5);
  await migrate(orm);
  return {
    url: databaseUrl(name),
    orm,
    drop: async () => {
      await orm.close();
      await onSharedDatabase(`drop database if exists "${name}" with (force)`, []);
    },
  };
}

/** The databases of every process of this run (this one's among them), for the secret scan. */
export async function suiteDatabaseUrls(): Promise<string[]> {
  const rows = await onSharedDatabase<{ datname: string }>('select datname from pg_database where starts_with(datname, $1) order by datname', [processDatabasePrefix]);
  return rows.map((row) => databaseUrl(row.datname));
}

let orm: Promise<Orm> | undefined;
export function testOrm(): Promise<Orm> {
  orm ??= (async () => {
    await createProcessDatabase();
    const instance = await createOrm(requiredEnv('DATABASE_URL'), 20);
    await migrate(instance);
    return instance;
  })();
  return orm;
}

/**
 * The dev server of this process, started by us rather than by the SDK: a process exiting while mocha
 * ends its workers kills it on the way out (`exit` handlers are synchronous), where an SDK-started one
 * would outlive the run.
 */
async function startDevServer(): Promise<TestWorkflowEnvironment> {
  const port = await freeLoopbackPort();
  const searchAttributes = SEARCH_ATTRIBUTE_KEYS.flatMap(({ name, type }) => ['--search-attribute', `${name}=${TypedSearchAttributes.toMetadataType(type)}`]);
  const server = spawn(requiredEnv('TEMPORAL_CLI_PATH'), ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless', '--log-level', 'error', ...searchAttributes], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  process.once('exit', () => server.kill('SIGKILL'));
  let exited: string | undefined;
  server.once('exit', (code, signal) => (exited = `the Temporal dev server exited (${signal ?? code})`));
  for (const deadline = Date.now() + 30_000; ; ) {
    if (exited) throw new Error(exited);
    try {
      return await TestWorkflowEnvironment.createFromExistingServer({ address: `127.0.0.1:${port}` });
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

let local: Promise<TestWorkflowEnvironment> | undefined;
/** A real Temporal dev server (schedules, search attributes, visibility): for API and setup tests. */
export function localTemporal(): Promise<TestWorkflowEnvironment> {
  local ??= startDevServer();
  return local;
}

let cluster: Promise<TestWorkflowEnvironment> | undefined;
/**
 * A Temporal cluster of separate services (frontend, two history processes, matching, worker: scripts/temporal-cluster.sh)
 * on the suite's PostgreSQL server, started once for every file of this process that asks for it. Its databases are
 * named after the shared one but outside the process databases' prefix (the secret scan reads those, and expects the
 * service's schema there); scripts/test.sh drops them with the rest. Only when the server is built: the callers check
 * temporalServerBuilt first.
 */
export function clusterTemporal(): Promise<TestWorkflowEnvironment> {
  cluster ??= (async () => {
    const url = new URL(sharedDatabaseUrl);
    const database = `${url.pathname.slice(1)}_temporal${process.pid}`;
    const dir = mkdtempSync(path.join(os.tmpdir(), 'custody-temporal-cluster-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const started = new TemporalCluster({
      dir,
      pgHost: url.hostname,
      pgPort: Number(url.port || 5432),
      pgUser: decodeURIComponent(url.username) || 'postgres',
      pgPassword: decodeURIComponent(url.password),
      database,
      visibilityDatabase: `${database}_visibility`,
    });
    const seconds = await started.start();
    console.log(`      the Temporal cluster is up on ${started.address} in ${seconds.toFixed(1)} s`);
    return TestWorkflowEnvironment.createFromExistingServer({ address: started.address });
  })();
  return cluster;
}

let timeSkipping: Promise<TestWorkflowEnvironment> | undefined;
/**
 * The time-skipping test server of the current test file: 24 h timers pass in moments. Each file
 * releases it when done (`after(releaseTimeSkippingTemporal)`): a workflow a file leaves behind
 * (an expiry timer firing into a task queue no worker serves any more) would otherwise hold the
 * clock of every later file.
 */
export function timeSkippingTemporal(): Promise<TestWorkflowEnvironment> {
  timeSkipping ??= startTimeSkipping();
  return timeSkipping;
}

/**
 * The SDK gives the server 5 s to listen on the port it picked; on a loaded machine it sometimes misses them (or
 * the port was taken in between), and a new server on a new port is tried, three times in all.
 */
async function startTimeSkipping(attempt = 1): Promise<TestWorkflowEnvironment> {
  try {
    return await TestWorkflowEnvironment.createTimeSkipping({
      server: { executable: { type: 'existing-path', path: requiredEnv('TEMPORAL_TEST_SERVER_PATH') } },
    });
  } catch (error) {
    if (attempt >= 3 || !/did not start/.test((error as Error).message)) throw error;
    return startTimeSkipping(attempt + 1);
  }
}

export async function releaseTimeSkippingTemporal(): Promise<void> {
  const released = timeSkipping;
  timeSkipping = undefined;
  await released?.then((env) => env.teardown());
}

/** Every configured node (anvil, btcd) call made inside a database transaction, by any test of the suite. */
const nodeCallsInTransactions = watchNodeCallsInTransactions();

/** Every pooled connection acquired inside a database transaction that holds one, by any test of the suite (test/support/pool-waits.ts). */
const poolWaits = watchPoolWaits();

/**
 * After each file, the dev server it shares with the process's next files holds nothing of it: a workflow it left
 * running (a devnet block producer on a task queue whose worker is gone, a schedule) would take the next file's
 * requests, and an Update to it would wait for a worker that never comes.
 */
async function endWorkflowsOfFile(): Promise<void> {
  // A cluster that failed to start failed its file already.
  for (const server of [local, cluster]) {
    const env = await server?.catch(() => undefined);
    if (env) await endWorkflowsOn(env);
  }
}

async function endWorkflowsOn({ client }: TestWorkflowEnvironment): Promise<void> {
  for await (const schedule of client.schedule.list()) await client.schedule.getHandle(schedule.scheduleId).delete();
  for await (const execution of client.workflow.list({ query: 'ExecutionStatus="Running"' })) {
    await client.workflow
      .getHandle(execution.workflowId, execution.runId)
      .terminate('the test file that started it has finished')
      .catch((error: unknown) => {
        if (!(error instanceof WorkflowNotFoundError)) throw error; // ended meanwhile
      });
  }
}

let fileStartedAt = 0;
let fileCpuAtStart = process.cpuUsage();
/**
 * Each file's time in a parallel run and the CPU its process spent meanwhile (its tests, the app and workers they
 * run in process; not the servers and nodes it spawned), for the slowest-files list scripts/test.sh prints
 * (test/support/summary.ts): on two cores the suite is bound by CPU, so the CPU column says what to make cheaper.
 */
function recordFileTime(file: string | undefined): void {
  const dir = process.env.TEST_ARTIFACTS_DIR;
  if (!dir || !file) return;
  const cpu = process.cpuUsage(fileCpuAtStart);
  const record = { file: path.relative(process.cwd(), file), seconds: (performance.now() - fileStartedAt) / 1000, cpu_seconds: (cpu.user + cpu.system) / 1e6 };
  appendFileSync(path.join(dir, `times-${process.pid}.jsonl`), `${JSON.stringify(record)}\n`);
}

export const mochaHooks = {
  /** Before each file: this process's database made and migrated (once), for tests that connect to it on their own. */
  async beforeAll(this: Mocha.Context) {
    this.timeout(120_000);
    fileStartedAt = performance.now();
    fileCpuAtStart = process.cpuUsage();
    await testOrm();
  },
  /**
   * Every test ends with the ledger's invariants whole (every posting balanced, each balance row the sum of
   * its accounts and never negative), with no node call made inside a database transaction and no pooled connection
   * acquired while a transaction holds one.
   */
  async afterEach(this: Mocha.Context) {
    const nodeCalls = nodeCallsInTransactions.calls.splice(0);
    if (nodeCalls.length > 0) throw new Error(`a chain node was called inside a database transaction:\n${nodeCalls.join('\n')}`);
    const waits = [...new Set(poolWaits.waits.splice(0))];
    // POOL_WAITS_REPORT=<file> lists them there instead, every test going on: a survey of the offenders of many files in one run.
    if (waits.length > 0 && process.env.POOL_WAITS_REPORT) appendFileSync(process.env.POOL_WAITS_REPORT, waits.map((wait) => `${this.currentTest?.fullTitle()}\t${wait}\n`).join(''));
    else if (waits.length > 0) throw new Error(`a pooled connection was acquired inside a database transaction that holds one:\n${waits.join('\n')}`);
    if (!orm) return;
    // Negative balances included: the only one that is no fault of the books, a deposit a test's reorganisation
    // reversed after it was spent, is reported by an open overdrawn drift, and ledgerBreaks leaves it out.
    const broken = await ledgerBreaks((await orm).em.fork(), ledgerProjections, null);
    if (broken.length > 0) throw new Error(`the ledger's invariants are broken: ${JSON.stringify(broken)}`);
  },
  /** After each file: its time-skipping server (the database and the dev server serve the process's next files). */
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await releaseTimeSkippingTemporal();
    await endWorkflowsOfFile();
    recordFileTime(this.test?.parent?.suites[0]?.file);
  },
};
