import { randomUUID } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import Decimal from 'decimal.js';
import pg from 'pg';
import { loadConfig } from '../src/config';
import { resourceSearchAttributes } from '../src/temporal/search-attributes';
import { PostgresComponent } from '../test/support/chaos/components';
import { StartedProcesses } from '../test/support/chaos/started-processes';
import { eventually } from '../test/support/eventually';
import { freeLoopbackPort } from '../test/support/ports';
import { processStat } from '../test/support/proc-stat';
import { sandboxOrganizations } from '../test/support/sandbox-organizations';
import { ServiceProcess } from '../test/support/service-process';
import { CLUSTER_SERVICES, TemporalCluster } from '../test/support/temporal-cluster';
import { alternate, BENCH_CARD_BODY, BENCH_SECONDS, callerFor, type Caller, cpuByGroup, type CpuSnapshot, median, medianOf, report, round, runBenchmark, serviceProcessEnv } from './support';
import type { BareShape } from './workflows/bare';

/**
 * Capacity on paper, checked by a run (issue 51): what one API process, one worker and one Temporal history shard
 * sustain for each money flow, on a Temporal cluster of separate processes (scripts/temporal-cluster.sh) with ONE
 * history shard on a PostgreSQL server of its own, the service's processes as `npm start` runs them (dist/src/server.js,
 * dist/src/worker.js) on the benchmark's PostgreSQL (fsync on), the load from this process.
 *
 * Each flow runs SCALING_IN_FLIGHT at a time (an on-chain send, which mostly waits for blocks, SCALING_SENDS_IN_FLIGHT) for
 * BENCH_SECONDS (a send: SCALING_SEND_SECONDS, several of its confirmation times), alternating with the bare workflow of its shape (as many
 * activities and local activities as the flow's history shows; bench/workflows/bare.ts, run by a worker process of its
 * own, bench/scaling-bare-worker.ts) on the same cluster. Every process's CPU is read from /proc by group (the API, the
 * worker, each Temporal service, each PostgreSQL server with its backends), less what the group spends idle (the
 * service's scanners and devnet blocks; the lower of two quiet windows, before and after the load): the CPU one flow
 * costs each part. One Node process
 * runs one event loop, so one API (or worker) process sustains at most 1000 ms / its ms per flow; the measured run on
 * this machine says which part ran out first. docs/scaling.md's tables are written from the result
 * (`npm run bench:table`).
 */
const IN_FLIGHT = Number(process.env.SCALING_IN_FLIGHT ?? 20);
const SENDS_IN_FLIGHT = Number(process.env.SCALING_SENDS_IN_FLIGHT ?? 60);
const SEND_SECONDS = Number(process.env.SCALING_SEND_SECONDS ?? Math.max(BENCH_SECONDS, 60));
const SHARDS = 1;
const FLOW_TIMEOUT_MS = 120_000;
/** A quiet window: the work the setup started ends during the first seconds, the rest measures what idling costs. */
const QUIET_SETTLE_SECONDS = 10;
const QUIET_SECONDS = 20;
/** The ETH sent by each on-chain send, and what each sending wallet is funded with. */
const SEND_ETH = '0.0001';
const WALLET_ETH = '10';
const OUTSIDE_ADDRESS = '0x52908400098527886E0F7030069857D2E4169EE7';

/** One flow run, with the workflow id whose history gives its shape. */
type Flow = (loop: number) => Promise<string>;

export interface ScalingRow {
  target: string;
  round: number;
  completed: number;
  seconds: number;
  in_flight: number;
  per_second: number;
  latency_p50_ms: number;
  latency_p99_ms: number;
  /** CPU ms each group spent over the measurement. */
  cpu_gross_ms: Record<string, number>;
  /** CPU ms per completed flow by group, less the group's idle rate over the measurement (filled once both quiet windows are read). */
  cpu_ms_per_flow: Record<string, number>;
  /** Of the machine's cores, the share not used during the measurement (near 0: the machine ran out). */
  machine_idle_share: number;
}

/** The postmaster of the server behind `databaseUrl`: the parent of a backend (its backends are the postmaster's children). */
async function postmasterOf(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const backend = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    return processStat(backend)!.ppid;
  } finally {
    await client.end();
  }
}

async function main() {
  const config = loadConfig(process.env);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'custody-bench-scaling-'));
  // The PostgreSQL server of Temporal's store runs as the postgres user, which must reach its folder.
  await chmod(dir, 0o755);
  const processes = new StartedProcesses(dir, (line) => console.log(`[scaling] ${line}`));
  const store = new PostgresComponent(path.join(dir, 'temporal-postgres'), await freeLoopbackPort(), processes, 'temporal-postgres');
  const cluster = new TemporalCluster({ dir: path.join(dir, 'cluster'), pgPort: store.port, database: 'temporal', visibilityDatabase: 'temporal_visibility', shards: SHARDS });
  const services: ServiceProcess[] = [];
  try {
    await store.start();
    console.log(`the Temporal cluster (${SHARDS} history shard) is up in ${(await cluster.start()).toFixed(1)} s`);
    const organizations = await sandboxOrganizations(config.DATABASE_URL, 'Scaling', ['cards', 'payer', 'payee', 'sender'] as const);
    const taskQueue = `bench-scaling-${randomUUID()}`;
    const bareQueue = `${taskQueue}-bare`;
    const port = await freeLoopbackPort();
    const env = {
      ...serviceProcessEnv(path.join(dir, 'data'), taskQueue),
      TEMPORAL_ADDRESS: cluster.address,
      // The devnet's blocks and a send's checks at their default pace (a block is work of the worker and Temporal whatever
      // the load; each check of a send one activity); a send settles at its first confirmation, so its life is about one
      // block's wait (12 confirmations, the default, would add the checks of two minutes to each).
      CHAIN_CONFIRMATIONS_ETHEREUM: '1',
    };
    const api = new ServiceProcess('api', 'server.js', { ...env, HOST: '127.0.0.1', PORT: String(port) });
    const worker = new ServiceProcess('worker', 'worker.js', env);
    const bareWorker = new ServiceProcess('bare worker', '../bench/scaling-bare-worker.js', { ...env, BARE_TASK_QUEUE: bareQueue });
    services.push(api, worker, bareWorker);
    const url = `http://127.0.0.1:${port}`;
    await eventually(async () => ((await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined), 'the API ready', 120_000, 200);

    const roots: Record<string, number[]> = {
      api: [api.pid],
      worker: [worker.pid],
      bare_worker: [bareWorker.pid],
      temporal_history: [cluster.pid('history-1')!, cluster.pid('history-2')!],
      temporal_frontend: [cluster.pid('frontend')!],
      temporal_matching: [cluster.pid('matching')!],
      temporal_worker_service: [cluster.pid('worker')!],
      postgresql_service: [await postmasterOf(config.DATABASE_URL)],
      postgresql_temporal: [Number((await readFile(path.join(dir, 'temporal-postgres/data/postmaster.pid'), 'utf8')).split('\n')[0])],
    };
    const connection = await Connection.connect({ address: cluster.address });
    const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
    const settled = async <T>(workflowId: string): Promise<T> => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${workflowId} did not end within ${FLOW_TIMEOUT_MS} ms`)), FLOW_TIMEOUT_MS);
      });
      try {
        return await Promise.race([client.workflow.getHandle(workflowId).result() as Promise<T>, timeout]);
      } finally {
        clearTimeout(timer);
      }
    };
    try {
      await measureAll({ call: (as) => callerFor(url, organizations[as].secret), settled, client, bareQueue, roots });
    } finally {
      await connection.close();
    }
  } catch (error) {
    throw new Error(`${(error as Error).stack}\n${services.map((each) => each.log).join('\n')}\n${cluster.logs()}`);
  } finally {
    await Promise.all(services.map((each) => each.stop()));
    await cluster.stop();
    for (const name of CLUSTER_SERVICES) if (cluster.pid(name)) processes.ended(cluster.pid(name)!);
    await store.stop();
    processes.release();
    await rm(dir, { recursive: true, force: true });
  }
}

interface Harness {
  call: (as: 'cards' | 'payer' | 'payee' | 'sender') => Caller;
  settled: <T>(workflowId: string) => Promise<T>;
  client: Client;
  bareQueue: string;
  roots: Record<string, number[]>;
}

async function measureAll({ call, settled, client, bareQueue, roots }: Harness) {
  const loopsOf = (count: number) => Array.from({ length: count }, (_, index) => index);
  const loops = loopsOf(IN_FLIGHT);
  const sendLoops = loopsOf(SENDS_IN_FLIGHT);

  // Card funding: one card per loop, so no two fundings wait on one card's row.
  const cards = call('cards');
  await cards('POST', '/v1/sandbox/balances', { currency: 'USD', amount: String(10n ** 14n) });
  const cardIds = await Promise.all(
    loops.map(async () => {
      const cardId = (await cards('POST', '/api/cards', BENCH_CARD_BODY)).data.card.id as string;
      await settled(`card-provisioning-${cardId}`);
      return cardId;
    }),
  );
  const fundCard: Flow = async (loop) => {
    const moved = await cards('POST', `/api/cards/${cardIds[loop]!}/balance`, { type: 'fund', amount: 100, reference: randomUUID() });
    const workflowId = moved.data.transaction.workflow_id as string;
    const result = await settled<{ status: string }>(workflowId);
    if (result.status !== 'completed') throw new Error(`card funding ended ${result.status}`);
    return workflowId;
  };

  // Internal Lightning payment: invoices the payee issued before the measurement, each paid by one request.
  const [payer, payee] = [call('payer'), call('payee')];
  await payer('POST', '/v1/sandbox/balances', { currency: 'BTC', amount: String(10n ** 14n) });
  const createInvoice = async () => (await payee('POST', '/api/lightning/invoices', { amount: 1_000, description: 'scaling', reference: randomUUID() })).request as string;
  const invoices: string[] = [];
  const issueInvoices = async () => {
    const count = BENCH_SECONDS * 60;
    while (invoices.length < count) invoices.push(...(await Promise.all(loops.map(createInvoice))));
  };
  const payInvoice: Flow = async () => {
    const payment = await payer('POST', '/api/lightning/payments', { request: invoices.pop() ?? (await createInvoice()), reference: randomUUID() });
    const workflowId = payment.data.workflow_id as string;
    const status = await settled<string>(workflowId);
    if (status !== 'paid') throw new Error(`Lightning payment ended ${status}`);
    return workflowId;
  };

  // On-chain send on the sandbox's Ethereum devnet: one funded wallet per loop (a wallet's sends queue on its nonce).
  const sender = call('sender');
  const wallets = await Promise.all(
    sendLoops.map(async (loop) => {
      const vault = await sender('POST', '/v1/vaults', { name: `Scaling ${loop}` });
      const wallet = await sender('POST', '/v1/wallets', { name: `Scaling ${loop}`, chain: 'ethereum', vault_id: vault.id, wallet_type: 'hot' });
      await sender('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: wallet.primary_address.address, asset: 'ETH', amount: WALLET_ETH });
      return wallet.id as string;
    }),
  );
  await eventually(
    async () => {
      for (const walletId of wallets) {
        const rows = (await sender('GET', `/v1/wallets/${walletId}/balances`)).data as { asset_id: string; available: string }[];
        if (!rows.some((row) => row.asset_id === 'ETH' && new Decimal(row.available).gte(WALLET_ETH))) return undefined;
      }
      return true;
    },
    'every sending wallet funded and its deposit confirmed',
    120_000,
    1_000,
  );
  const sendEth: Flow = async (loop) => {
    const sent = await sender('POST', '/v1/transactions', { wallet_id: wallets[loop]!, to_address: OUTSIDE_ADDRESS, amount: SEND_ETH, asset: 'ETH' });
    const workflowId = sent.workflow_id as string;
    const status = await settled<string>(workflowId);
    if (status !== 'confirmed') throw new Error(`send ended ${status}`);
    return workflowId;
  };

  // The bare workflow of a flow's shape, read from one of its histories.
  const bareOrganizationId = randomUUID();
  const shapeOf = async (flow: Flow): Promise<BareShape> => {
    const workflowId = await flow(0);
    const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    return {
      activities: events.filter((event) => event.activityTaskScheduledEventAttributes).length,
      localActivities: events.filter((event) => event.markerRecordedEventAttributes?.markerName === 'core_local_activity').length,
    };
  };
  const bareOf =
    (shape: BareShape): Flow =>
    async () => {
      const workflowId = `bench-scaling-bare-${randomUUID()}`;
      await client.workflow.execute('bareWorkflow', {
        taskQueue: bareQueue,
        workflowId,
        args: [shape],
        typedSearchAttributes: new TypedSearchAttributes(resourceSearchAttributes({ organizationId: bareOrganizationId, type: 'bench_bare_workflow', id: workflowId })),
      });
      return workflowId;
    };

  const flows: { name: string; plural: string; flow: Flow; before?: () => Promise<void>; loops?: number[]; seconds?: number }[] = [
    { name: 'card funding', plural: 'card fundings', flow: fundCard },
    { name: 'internal Lightning payment', plural: 'internal Lightning payments', flow: payInvoice, before: issueInvoices },
    { name: 'on-chain send (sandbox Ethereum devnet, 1 confirmation)', plural: 'on-chain sends', flow: sendEth, loops: sendLoops, seconds: SEND_SECONDS },
  ];
  await issueInvoices();
  const measured = [];
  for (const each of flows) {
    const shape = await shapeOf(each.flow);
    measured.push({ ...each, shape, bare: `bare workflow of its shape (${shape.activities} activities, ${shape.localActivities} local)`, bareFlow: bareOf(shape) });
  }

  // Warm-up: caches, the JIT and the pools, unmeasured.
  for (const each of measured) {
    await each.before?.();
    await run(each.flow, each.loops ?? loops, 2);
    await run(each.bareFlow, each.loops ?? loops, 2);
  }
  // What each group spends with nothing to do (the scanners, the devnet's blocks, Temporal's own timers): the lower of a
  // quiet window before the load and one after it, so that work a measurement left running is not taken for idling.
  const idleBefore = await quietRates(roots);
  const rows: ScalingRow[] = [];
  const targets = measured.flatMap((each) => {
    const measureOne = (target: string, flow: Flow) => async (round: number) => {
      if (flow === each.flow) await each.before?.();
      const measuredRow = await measureFlows(target, round, flow, each.loops ?? loops, each.seconds ?? BENCH_SECONDS, roots);
      rows.push(measuredRow);
      return measuredRow;
    };
    return [
      { target: `${each.name}: ${each.bare}`, measure: measureOne(`${each.name}: ${each.bare}`, each.bareFlow) },
      { target: each.name, measure: measureOne(each.name, each.flow) },
    ];
  });
  await alternate(targets);
  const idleAfter = await quietRates(roots);
  const idleMsPerSecond = Object.fromEntries(Object.keys(idleBefore).map((group) => [group, Math.min(idleBefore[group]!, idleAfter[group] ?? Infinity)]));
  console.log('CPU ms per second with no load, by group (before, after, the lower):', { before: idleBefore, after: idleAfter, lower: idleMsPerSecond });
  for (const row of rows) row.cpu_ms_per_flow = lessIdle(row, idleMsPerSecond);
  const capacity = measured.map((each) => capacityOf(rows, each.name, `${each.name}: ${each.bare}`, each.shape));
  console.table(capacity);
  await report(
    'scaling',
    rows,
    // A send's rate is the chain's (its flows wait for a block), not a ratio to its bare workflow's nor a saturated machine's.
    measured
      .filter((each) => each.flow !== sendEth)
      .flatMap((each) => {
        const { measured_per_second: rate, machine_per_second_predicted: predicted } = capacity.find((line) => line.flow === each.name)!;
        return [
          { name: `${each.plural}/s / bare workflows of their shape/s on one history shard (medians)`, value: medianOf(rows, each.name, 'per_second') / medianOf(rows, `${each.name}: ${each.bare}`, 'per_second') },
          { name: `${each.plural}/s measured / predicted from their CPU per flow on these cores (the capacity arithmetic's check)`, value: rate / predicted },
        ];
      }),
    { capacity, shards: SHARDS, in_flight: IN_FLIGHT, sends_in_flight: SENDS_IN_FLIGHT, seconds: BENCH_SECONDS, send_seconds: SEND_SECONDS, idle_cpu_ms_per_second: idleMsPerSecond },
  );
}

/** CPU ms per second of each group between two readings `seconds` apart. */
const rates = (before: CpuSnapshot, after: CpuSnapshot, seconds: number) =>
  Object.fromEntries(Object.keys(after).map((group) => [group, round((after[group]! - (before[group] ?? 0)) / seconds)]));

/** Runs `flow` on every loop until `count` flows ended on each; the latencies. */
async function run(flow: Flow, loops: number[], count: number, until = Infinity): Promise<number[]> {
  const latencies: number[] = [];
  await Promise.all(
    loops.map(async (loop) => {
      for (let done = 0; done < count && Date.now() < until; done += 1) {
        const at = performance.now();
        await flow(loop);
        latencies.push(performance.now() - at);
      }
    }),
  );
  return latencies;
}

/** CPU ms per second of each group over a quiet window (after QUIET_SETTLE_SECONDS of nothing). */
async function quietRates(roots: Record<string, number[]>): Promise<Record<string, number>> {
  await new Promise((resolve) => setTimeout(resolve, QUIET_SETTLE_SECONDS * 1000));
  const before = cpuByGroup(roots);
  await new Promise((resolve) => setTimeout(resolve, QUIET_SECONDS * 1000));
  return rates(before, cpuByGroup(roots), QUIET_SECONDS);
}

/** A row's CPU per flow less what each group spends idling over the same seconds (never below 0). */
const lessIdle = (row: ScalingRow, idleMsPerSecond: Record<string, number>) =>
  Object.fromEntries(Object.entries(row.cpu_gross_ms).map(([group, ms]) => [group, round(Math.max(0, ms - (idleMsPerSecond[group] ?? 0) * row.seconds) / row.completed)]));

async function measureFlows(target: string, round_: number, flow: Flow, loops: number[], window: number, roots: Record<string, number[]>): Promise<ScalingRow> {
  const before = cpuByGroup(roots);
  const begin = performance.now();
  const latencies = await run(flow, loops, Infinity, Date.now() + window * 1000);
  const seconds = (performance.now() - begin) / 1000;
  const spent = rates(before, cpuByGroup(roots), 1);
  const flows = latencies.length;
  latencies.sort((a, b) => a - b);
  const percentile = (p: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0);
  return {
    target,
    round: round_,
    completed: flows,
    seconds: round(seconds),
    in_flight: loops.length,
    per_second: round(flows / seconds),
    latency_p50_ms: percentile(0.5),
    latency_p99_ms: percentile(0.99),
    cpu_gross_ms: Object.fromEntries(Object.entries(spent).filter(([group]) => group !== 'idle')),
    cpu_ms_per_flow: {},
    machine_idle_share: round(spent.idle! / (seconds * 1000 * os.cpus().length)),
  };
}

/** The parts of the cluster and the service whose CPU per flow the capacity table lists. */
const TEMPORAL_OTHER = ['temporal_frontend', 'temporal_matching', 'temporal_worker_service'];

/** One flow's line of docs/scaling.md: the medians of its rounds, and what one of each part sustains. */
function capacityOf(rows: ScalingRow[], flow: string, bare: string, shape: BareShape) {
  const of = (target: string, group: string) => median(rows.filter((row) => row.target === target).map((row) => row.cpu_ms_per_flow[group] ?? 0));
  const cpu = {
    api: of(flow, 'api'),
    worker: of(flow, 'worker'),
    temporal_history: of(flow, 'temporal_history'),
    temporal_other: round(TEMPORAL_OTHER.reduce((sum, group) => sum + of(flow, group), 0)),
    postgresql_service: of(flow, 'postgresql_service'),
    postgresql_temporal: of(flow, 'postgresql_temporal'),
    load_generator: of(flow, 'load_generator'),
  };
  const total = round(Object.entries(cpu).reduce((sum, [group, ms]) => (group === 'load_generator' ? sum : sum + ms), 0));
  const perCore = (ms: number) => (ms > 0 ? round(1000 / ms) : null);
  return {
    flow,
    shape,
    measured_per_second: medianOf(rows, flow, 'per_second'),
    latency_p99_ms: medianOf(rows, flow, 'latency_p99_ms'),
    machine_idle_share: medianOf(rows, flow, 'machine_idle_share'),
    bare_per_second: medianOf(rows, bare, 'per_second'),
    bare_temporal_history_ms: of(bare, 'temporal_history'),
    cpu_ms_per_flow: { ...cpu, total_without_load_generator: total },
    per_core: { api: perCore(cpu.api), worker: perCore(cpu.worker), temporal_history: perCore(cpu.temporal_history), temporal_other: perCore(cpu.temporal_other), postgresql_service: perCore(cpu.postgresql_service), postgresql_temporal: perCore(cpu.postgresql_temporal) },
    /** What this machine's cores sustain by the arithmetic when the flow alone uses them all, its load generator included. */
    machine_per_second_predicted: round((1000 * os.cpus().length) / (total + cpu.load_generator)),
  };
}

runBenchmark(main);
