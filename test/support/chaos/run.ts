import { randomUUID } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createOrm } from '../../../src/db/orm';
import { anvilMine, anvilSandboxConfig, deployAnvilToken, startAnvil } from '../anvil';
import { eventually } from '../eventually';
import { freeLoopbackPort } from '../ports';
import { sandboxOrganizations } from '../sandbox-organizations';
import { WebhookReceiver } from '../webhook-receiver';
import { check } from './checks';
import { ChaosClient } from './client';
import { NodeComponent, PostgresComponent, Replicas, Supervised, type Component } from './components';
import { plantFaults } from './expected';
import { runLoad, type LoadOutcome } from './load';
import { CONFIRMATIONS, Chain, ComponentName, FUNDING_FEE_BPS, ORGANIZATIONS, OrganizationName, TRON_CONFIRMATIONS, seededRandom, type TemporalMode } from './model';
import { Phases } from './phases';
import { mineTron } from './setup';
import { StartedProcesses, type StartedProcess } from './started-processes';
import { startedCluster, startedDevServer } from './temporal';

/**
 * The chaos run of issues 18, 34 and 51: PostgreSQL, Temporal (a cluster of separate services, or the dev server), the
 * API and the worker as separate processes (the compose file's way; two APIs and two workers on the cluster), a mixed
 * load of three organizations with idempotency keys (card creations and fundings, Lightning invoices paid by another
 * organization, on-chain sends, payout trips, sandbox credits, webhook tests, every event delivered to a local receiver) while each component is killed with SIGKILL, each
 * kill timed on a workflow inside an activity, and started again; then the invariants: every accepted operation
 * done exactly once and settled, each organization's money and cards what the load's own model says, every
 * expected event delivered or scheduled, no component exiting on its own. `npm run chaos` runs it long
 * (bench/chaos.ts), test/chaos.test.ts short (and with planted faults, to show the checks fail).
 */
export interface ChaosOptions {
  seed: number;
  /** How long the load runs; the kills fall inside it. */
  loadSeconds: number;
  killsPerComponent: number;
  /** Kills of a component other than killsPerComponent (the failover drill kills PostgreSQL's primary alone, once). */
  killsOf?: Partial<Record<ComponentName, number>>;
  /**
   * PostgreSQL as the run starts it, in `dir`, and the DATABASE_URL of the service and the checks: one cluster by
   * default; the failover drill's primary with a synchronous standby (failover.ts).
   */
  postgres?: (dir: string, processes: StartedProcesses) => Promise<{ component: Component; databaseUrl: string }>;
  operationsPerSecond: number;
  maxInFlight: number;
  /** How long, after the load, operations may take to reach a final state before the checks. */
  settleSeconds: number;
  /** Sandbox Ethereum on anvil: deposits, sends and the wallet ledger against the chain. */
  chain: boolean;
  /**
   * `cluster`: a Temporal cluster (history and matching killed) with two API and two worker processes, as production
   * runs; `dev`: the dev server (killed whole) with one of each, as `npm start` runs.
   */
  temporal: TemporalMode;
  /**
   * For the test that shows the checks can fail: after the checks, the driver plants a doubled credit and a skipped debit
   * in the same database and runs every check again (`faulted`).
   */
  plantFaults?: boolean;
  /** For the test that nothing the harness started outlives it: the harness fails after its first kill (kills.ts failOnPurpose). */
  failOnPurpose?: 'exception' | 'crash';
  log: (line: string) => void;
}

export interface ChaosResult {
  violations: string[];
  report: string[];
  /** With plantFaults: the start of the violation each planted fault must cause, and what the checks found after they were planted. */
  faulted?: { planted: string[]; violations: string[] };
  /** Operations the load sent (answered, setup excluded), and their rate over the load's wall-clock time. */
  operations: number;
  operationsPerSecond: number;
  /** Kills that fell while an accepted operation's workflow had an activity pending: in all, and per component. */
  killsInActivities: number;
  killsInActivitiesOf: Partial<Record<ComponentName, number>>;
  /** The load's schedule inside its window, counted (LoadOutcome's ticks). */
  ticks: LoadOutcome['ticks'];
  /**
   * What ran to its end, counted from the load's record and the outside parts (the chain, the rail): sweep runs the load
   * had accepted, sweep transactions found on the chain from a source to its main wallet, payout trips the load opened,
   * and those their rail paid as quoted.
   */
  completed: { sweepRuns: number; sweepsOnChain: number; trips: number; tripsPaidAsQuoted: number };
  /** SIGKILLs that found their component running, per component (one that found it down already kills nothing). */
  kills: Partial<Record<ComponentName, number>>;
  /** Every process the run started (each start and restart), all ended once it returned. */
  processes: StartedProcess[];
  /** Where the run's wall time went, phase by phase, its stop included (Phases). */
  phases: Phases;
}

/**
 * Runs the whole chaos: components up, load with kills, settle, checks. Everything it started is stopped before it
 * returns or throws (each start pushes its stop, run in reverse at the end); what a crash or a signal leaves running
 * is killed by StartedProcesses's exit hook.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'custody-chaos-'));
  // The cluster's owner (the postgres user, when we run as root) must reach its folder inside.
  await chmod(dir, 0o711);
  const processes = new StartedProcesses(dir, options.log);
  const stops: (() => Promise<unknown>)[] = [];
  const phases = new Phases();
  try {
    // The stop's phase is added to `phases` below, before the caller has the result.
    return { ...(await runStarted(options, dir, processes, stops, phases)), processes: processes.all, phases };
  } finally {
    for (const stop of stops.reverse()) await stop().catch((error: Error) => options.log(`stopping: ${error.message}`));
    await rm(dir, { recursive: true, force: true });
    processes.release();
    phases.end('stop');
    options.log(phases.line());
  }
}

async function runStarted(
  options: ChaosOptions,
  dir: string,
  processes: StartedProcesses,
  stops: (() => Promise<unknown>)[],
  phases: Phases,
): Promise<Omit<ChaosResult, 'processes' | 'phases'>> {
  const random = seededRandom(options.seed);
  options.log(`seed ${options.seed}; state in ${dir}`);
  const receiver = await new WebhookReceiver().start();
  stops.push(() => receiver.close());
  const anvil = await startAnvil();
  processes.started('anvil', anvil.pid);
  stops.push(async () => {
    clearInterval(chain.mining);
    await anvil.stop();
    processes.ended(anvil.pid);
  });
  const chain: Chain = { anvil, outside: privateKeyToAccount(generatePrivateKey()).address, wallets: {}, sweepSources: {}, deposited: new Map(), depositing: Promise.resolve() };
  const pgPort = await freeLoopbackPort();
  const replicas = options.temporal === 'cluster' ? 2 : 1;
  const apiPorts = await Promise.all(Array.from({ length: replicas }, () => freeLoopbackPort()));
  const { component: postgres, databaseUrl } = (await options.postgres?.(path.join(dir, 'postgres'), processes)) ?? {
    component: new PostgresComponent(path.join(dir, 'postgres'), pgPort, processes),
    databaseUrl: `postgresql://postgres@127.0.0.1:${pgPort}/postgres`,
  };
  // Temporal and the service's PostgreSQL (its schema and the organizations) start at once: neither needs the other, and
  // each takes tens of seconds on a busy machine. Both stop at once at the end, after the APIs and workers.
  const [temporalStart, postgresStart] = await Promise.allSettled([
    phases.timed('Temporal', options.temporal === 'cluster' ? startedCluster(path.join(dir, 'temporal'), processes, options.log) : startedDevServer(path.join(dir, 'temporal'), processes)),
    phases.timed('PostgreSQL and the organizations', postgres.start().then(() => sandboxOrganizations(databaseUrl, 'Chaos', ORGANIZATIONS))),
  ]);
  stops.push(() =>
    Promise.all([temporalStart.status === 'fulfilled' && phases.timed('Temporal', temporalStart.value.stop()), phases.timed('PostgreSQL', postgres.stop())]),
  );
  if (temporalStart.status === 'rejected') throw temporalStart.reason;
  if (postgresStart.status === 'rejected') throw new Error(`${(postgresStart.reason as Error).message}\n${postgres.log()}`);
  const temporal = temporalStart.value;
  const organizations = postgresStart.value;
  phases.end('anvil, Temporal and PostgreSQL');
  const taskQueue = `chaos-${randomUUID()}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_OPTIONS: '--max-semi-space-size=4',
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    DATA_DIR: path.join(dir, 'data'),
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_NAMESPACE: 'default',
    ...(options.chain ? anvilSandboxConfig(chain.anvil, taskQueue, await deployAnvilToken(chain.anvil), CONFIRMATIONS) : { TEMPORAL_TASK_QUEUE: taskQueue }),
    DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
    RATE_LIMIT_PER_SECOND: '1000000',
    RATE_LIMIT_BURST: '1000000',
    WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true',
    CARD_FUNDING_FEE_BPS: String(FUNDING_FEE_BPS),
    CHAIN_CONFIRMATIONS_TRON: String(TRON_CONFIRMATIONS),
    // A request the killed API held is taken over by its retry after this long.
    IDEMPOTENCY_LOCK_SECONDS: '10',
    // A trip's workflow ends once the trip has (after one look for late deposits) rather than watching its address for a
    // week: the settle window asks Temporal that every workflow of the load has ended, and the load pays no trip late.
    PAYOUT_LATE_PAYMENT_WATCH_HOURS: '0',
  };
  const worker = new Replicas(
    'worker',
    Array.from({ length: replicas }, () => new NodeComponent('worker', 'worker.js', env, processes)),
  );
  const api = new Replicas(
    'api',
    apiPorts.map((port) => new NodeComponent('api', 'server.js', { ...env, HOST: '127.0.0.1', PORT: String(port) }, processes)),
  );
  stops.push(() => phases.timed('APIs and workers', Promise.all([worker.stop(), api.stop()])));
  const supervised = [worker, api, ...temporal.components, postgres].map((component) => new Supervised(component));
  try {
    chain.mining = setInterval(() => void anvilMine(chain.anvil, 1).catch(() => undefined), 1000);
    await worker.start();
    await api.start();
    const supervising = setInterval(() => supervised.forEach((each) => void each.tick()), 500);
    // Supervision ends (its tick in progress done) before the APIs and workers stop, so that nothing starts them again.
    stops.push(async () => {
      clearInterval(supervising);
      await Promise.all(supervised.map((each) => each.stop()));
    });
    const urls = apiPorts.map((port) => `http://127.0.0.1:${port}`);
    for (const url of urls) await eventually(async () => ((await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined), `the API at ${url} ready`, 120_000, 200);
    const client = new ChaosClient(urls, Object.fromEntries(ORGANIZATIONS.map((name) => [name, organizations[name].secret])) as Record<OrganizationName, string>);
    // The scan starts at the tip it first sees (transfers before it are not credited): deposits wait for it.
    if (options.chain) await ethereumScanStarted(databaseUrl);
    const temporalConnection = await Connection.connect({ address: temporal.address });
    stops.push(() => temporalConnection.close());
    const orm = await createOrm(databaseUrl, 2);
    stops.push(() => orm.close());
    const temporalClient = new Client({ connection: temporalConnection });
    const tronMining = mineTron(client);
    stops.push(() => tronMining.stop());
    phases.end('APIs and workers up');
    const load = await runLoad(options, random, client, receiver, supervised, chain, temporalClient, phases);
    options.log('load done; settling');
    const checked = (pass: { recheck: boolean; phases?: Phases }) => check(options, orm, temporalClient, client, load, receiver, supervised, chain, env, organizations, pass);
    const result = await checked({ recheck: false, phases });
    result.report.push(phases.line());
    if (!options.plantFaults) return result;
    const planted = await plantFaults(orm, organizations);
    const faulted = { planted, violations: (await checked({ recheck: true })).violations };
    phases.end('planted faults re-checked');
    return { ...result, faulted };
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${[api, worker, temporal, postgres].map((each) => each.log()).join('\n')}`);
  }
}

async function ethereumScanStarted(databaseUrl: string): Promise<void> {
  const orm = await createOrm(databaseUrl, 1);
  try {
    await eventually(
      async () => ((await orm.em.fork().getConnection().execute(`select 1 from chain_scan_cursors where chain = 'ethereum' and environment = 'sandbox'`)).length > 0 ? true : undefined),
      'the Ethereum scan started',
      120_000,
      500,
    );
  } finally {
    await orm.close();
  }
}
