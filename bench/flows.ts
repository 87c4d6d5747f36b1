import { randomUUID } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Client } from '@temporalio/client';
import Router from '@koa/router';
import Koa from 'koa';
import pg from 'pg';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { createApiKey } from '../src/api-keys/service';
import { loadConfig } from '../src/config';
import { createOrm, migrate } from '../src/db/orm';
import { createApp } from '../src/http/app';
import { IdempotencyService } from '../src/idempotency/service';
import { routeModules } from '../src/modules';
import { createOrganization } from '../src/organizations/service';
import { createAppDeps } from '../src/runtime';
import { temporalConnectionOptions } from '../src/temporal/client';
import { resourceSearchAttributes } from '../src/temporal/search-attributes';
import { ensureSearchAttributes } from '../src/temporal/setup';
import { createWorker, quietBundlerLogger } from '../src/worker-setup';
import { alternate, BENCH_CARD_BODY, BENCH_SECONDS, cpuSnapshot, cpuSpentSince, listen, median, medianOf, report, runBenchmark, serviceLogger, urlOf } from './support';
import type { BareActivities, BareShape } from './workflows/bare';

/**
 * Money flows end to end (API request → workflow → settled) against the orchestration ceiling of the
 * same shape: a bare workflow with as many activities and local activities as the flow's own workflow
 * runs (read from its history), started with the same search attributes every workflow of ours carries
 * (organization, resource type and id) and awaited on the same Temporal dev server, in the same
 * process. The service's real workers (createWorker, as src/worker.ts builds them) and the real app
 * run in this process, logging as `npm start` does, so its resident memory is the worker's (plus the
 * API's) and is sampled beside throughput. Each measurement keeps FLOWS_IN_FLIGHT flows going until
 * FLOWS_PER_ROUND have completed or BENCH_SECONDS have passed; BENCH_ROUNDS rounds alternate each
 * flow's ceiling with the flow (ceiling, flow, ceiling, flow…) so noise hits both; ratios are of medians.
 */
const FLOWS_PER_ROUND = Number(process.env.BENCH_FLOWS ?? 300);
const FLOWS_IN_FLIGHT = Number(process.env.BENCH_FLOWS_IN_FLIGHT ?? 10);
const DEAD_ENDPOINTS = 12;
/** BENCH_FLOWS_FUNDING_ONLY=1: only the card funding against its ceiling (to iterate on it; the other flows and the dead endpoints are left out). */
const FUNDING_ONLY = process.env.BENCH_FLOWS_FUNDING_ONLY === '1';
/** No single flow may wait longer: a stuck workflow fails the benchmark rather than hanging it. */
const FLOW_TIMEOUT_MS = 60_000;
const MiB = 1024 * 1024;

/** A full collection on demand, so the live heap after each measurement tells growth from garbage not yet collected. */
v8.setFlagsFromString('--expose_gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

interface FlowMeasurement {
  target: string;
  round: number;
  completed: number;
  per_second: number;
  latency_p50_ms: number;
  latency_p99_ms: number;
  rss_peak_mib: number;
  heap_used_peak_mib: number;
  /** After a full collection at the end of the measurement: what the process keeps. */
  heap_live_mib: number;
  rss_after_gc_mib: number;
  /** The machine's CPU per completed flow, in ms, by where it went (bench/support.ts cpuSnapshot; Linux only). */
  cpu_ms_per_flow?: Record<string, number>;
}

/** Every SQL statement this process sends (ORM and prepared lookups alike go through pg.Client#query), for the cost of one flow. */
let sqlStatements = 0;
const sendQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
  sqlStatements += 1;
  return sendQuery.apply(this, args);
} as typeof pg.Client.prototype.query;

/** A flow's workflow id, for its history. */
type Flow = () => Promise<string>;

interface FlowCost {
  target: string;
  http_requests: number;
  /** Statements from the first request to the workflow's result, averaged over COST_SAMPLES flows run one at a time. */
  sql_statements: number;
  history_events: number;
  workflow_tasks: number;
  activity_tasks: number;
  local_activities: number;
}

/** Flows run one after another for the cost table. */
const COST_SAMPLES = 5;

/** Runs `flow` FLOWS_IN_FLIGHT at a time until FLOWS_PER_ROUND completed or BENCH_SECONDS passed, sampling memory. */
async function measureFlows(target: string, round: number, flow: Flow, seconds = BENCH_SECONDS, count = FLOWS_PER_ROUND): Promise<FlowMeasurement> {
  let started = 0;
  const latencies: number[] = [];
  let rssPeak = 0;
  let heapPeak = 0;
  const sample = () => {
    const { rss, heapUsed } = process.memoryUsage();
    rssPeak = Math.max(rssPeak, rss);
    heapPeak = Math.max(heapPeak, heapUsed);
  };
  const sampler = setInterval(sample, 200);
  const cpuBefore = cpuSnapshot();
  const deadline = Date.now() + seconds * 1000;
  const begin = performance.now();
  try {
    await Promise.all(
      Array.from({ length: FLOWS_IN_FLIGHT }, async () => {
        while (started < count && Date.now() < deadline) {
          started += 1;
          const at = performance.now();
          await flow();
          latencies.push(performance.now() - at);
        }
      }),
    );
  } finally {
    clearInterval(sampler);
  }
  sample();
  const elapsed = (performance.now() - begin) / 1000;
  const cpuPerFlow = cpuSpentSince(cpuBefore, latencies.length);
  collectGarbage();
  const afterGc = process.memoryUsage();
  latencies.sort((a, b) => a - b);
  const percentile = (p: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0);
  return {
    target,
    round,
    completed: latencies.length,
    per_second: Number((latencies.length / elapsed).toFixed(2)),
    latency_p50_ms: percentile(0.5),
    latency_p99_ms: percentile(0.99),
    rss_peak_mib: Math.round(rssPeak / MiB),
    heap_used_peak_mib: Math.round(heapPeak / MiB),
    heap_live_mib: Math.round(afterGc.heapUsed / MiB),
    rss_after_gc_mib: Math.round(afterGc.rss / MiB),
    ...(cpuPerFlow ? { cpu_ms_per_flow: cpuPerFlow } : {}),
  };
}

/** A local webhook receiver answering 200 to everything. */
async function startReceiver(): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** A local TCP server that accepts connections and never answers: every delivery to it runs into its timeout. */
async function startSilentServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

type Call = (method: string, path: string, body?: unknown) => Promise<any>;

/** JSON calls to the service with one organization's key; anything but 2xx fails the benchmark. */
function caller(url: string, secret: string): Call {
  return async (method, path, body) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return JSON.parse(text);
  };
}

async function main() {
  // The SDK's own log (worker state changes) at WARN, so the benchmark's output stays readable.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const taskQueue = `bench-flows-${randomUUID()}`;
  const config = loadConfig({
    ...process.env,
    RATE_LIMIT_BURST: '1000000000',
    RATE_LIMIT_PER_SECOND: '1000000000',
    TEMPORAL_TASK_QUEUE: taskQueue,
    WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true',
  });
  const orm = await createOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  await migrate(orm);
  const log = serviceLogger(config.LOG_LEVEL);
  const deps = createAppDeps(config, orm, log);
  const client = deps.temporal.client as Client;
  if (config.TEMPORAL_SEARCH_ATTRIBUTES) await ensureSearchAttributes(deps.temporal.connection, config.TEMPORAL_NAMESPACE);
  const service = await listen(createApp(deps, routeModules).app);
  const url = urlOf(service);

  // The service's workers as src/worker.ts builds them, and the ceiling's worker on a queue of its own.
  const nativeConnection = await NativeConnection.connect(temporalConnectionOptions(config));
  const workers = await createWorker({
    connection: nativeConnection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue,
    deps: { config, orm, log, idempotency: new IdempotencyService(config.IDEMPOTENCY_LOCK_SECONDS) },
  });
  const bareQueue = `${taskQueue}-bare`;
  // The bare funding's own table and pool: a row written by its request and again by its local activity.
  const barePool = new pg.Pool({ connectionString: config.DATABASE_URL, max: config.DATABASE_POOL_MAX });
  await barePool.query('create table if not exists bench_fundings (id text primary key, amount bigint not null, settled_at timestamptz)');
  const bareWorker = await Worker.create({
    connection: nativeConnection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: bareQueue,
    workflowBundle: await bundleWorkflowCode({ workflowsPath: require.resolve('./workflows/bare'), logger: quietBundlerLogger }),
    activities: {
      touch: async (rowId) => {
        if (rowId) await barePool.query({ name: 'bench_settle', text: 'update bench_fundings set settled_at = now() where id = $1', values: [rowId] });
      },
    } satisfies BareActivities,
  });
  const running = Promise.all([workers.run(), bareWorker.run()]);
  const receiver = await startReceiver();
  const silent = await startSilentServer();
  // The organization the bare workflows are indexed under, as ours are under theirs.
  const bareOrganizationId = randomUUID();
  /** How every bare workflow starts: on its own queue, indexed as ours are (src/temporal/starter.ts; the dev server writes the attributes at the start and the close). */
  const bareStart = (workflowId: string, shape: BareShape) => ({
    taskQueue: bareQueue,
    workflowId,
    args: [shape],
    ...(config.TEMPORAL_SEARCH_ATTRIBUTES ? { typedSearchAttributes: resourceSearchAttributes({ organizationId: bareOrganizationId, type: 'bench_bare_workflow', id: workflowId }) } : {}),
  });
  // The funding's whole shape without our code: a bare Koa route that writes one row (one durable
  // statement) and starts a bare workflow of the funding's shape, whose local activity writes the row
  // again; the client waits for the workflow as it waits for a funding. No authentication, validation,
  // lock, ledger, outbox, event or log: what the ratio to it prices is our code, not the trip's I/O.
  const bareApp = new Koa();
  const bareRouter = new Router();
  bareRouter.post('/fundings', async (ctx) => {
    const rowId = randomUUID();
    await barePool.query({ name: 'bench_fund', text: 'insert into bench_fundings (id, amount) values ($1, $2)', values: [rowId, 100] });
    const workflowId = `bench-bare-funding-${rowId}`;
    await client.workflow.start('bareWorkflow', bareStart(workflowId, { activities: 0, localActivities: 1, rowId }));
    ctx.body = { workflow_id: workflowId };
  });
  bareApp.use(bareRouter.routes());
  const bareService = await listen(bareApp);

  try {
    const organization = async (name: string) => {
      const em = orm.em.fork();
      const created = createOrganization(em, name);
      const { secret } = createApiKey(em, { organization: created, name, scopes: ['*'], environment: 'sandbox' });
      await em.flush();
      return caller(url, secret);
    };
    const awaitWorkflow = <T>(workflowId: string) => deps.starter.result<T>(workflowId, new Date(Date.now() + FLOW_TIMEOUT_MS));

    /** FLOWS_IN_FLIGHT active cards of a credited organization, one per concurrent loop, so no two fundings wait on one card's row. */
    const cardsOf = async (call: Call) => {
      await call('POST', '/v1/sandbox/balances', { currency: 'USD', amount: String(10n ** 14n) });
      return Promise.all(
        Array.from({ length: FLOWS_IN_FLIGHT }, async () => {
          const created = await call('POST', '/api/cards', BENCH_CARD_BODY);
          const cardId = created.data.card.id as string;
          await awaitWorkflow(`card-provisioning-${cardId}`);
          return cardId;
        }),
      );
    };
    /** Each concurrent loop takes the next card of the set, round-robin. */
    const funding = (call: Call, cardIds: string[]) => {
      let next = 0;
      return async () => {
        const cardId = cardIds[next++ % cardIds.length]!;
        const moved = await call('POST', `/api/cards/${cardId}/balance`, { type: 'fund', amount: 100, reference: randomUUID() });
        const workflowId = moved.data.transaction.workflow_id as string;
        const result = await awaitWorkflow<{ status: string }>(workflowId);
        if (result.status !== 'completed') throw new Error(`card funding ended ${result.status}`);
        return workflowId;
      };
    };

    const cardholder = await organization('Benchmark cards');
    const fundCard = funding(cardholder, await cardsOf(cardholder));

    const payer = await organization('Benchmark payer');
    const payee = await organization('Benchmark payee');
    await payer('POST', '/v1/sandbox/balances', { currency: 'BTC', amount: String(10n ** 14n) });
    const createInvoice = async () => (await payee('POST', '/api/lightning/invoices', { amount: 1_000, description: 'benchmark', reference: randomUUID() })).request as string;
    const pay = async (request: string) => {
      const payment = await payer('POST', '/api/lightning/payments', { request, reference: randomUUID() });
      const workflowId = payment.data.workflow_id as string;
      const status = await awaitWorkflow<string>(workflowId);
      if (status !== 'paid') throw new Error(`Lightning payment ended ${status}`);
      return workflowId;
    };
    // The whole trip as a client makes it: the payee's invoice, the payer's preview, the payment.
    const invoiceAndPay = async () => {
      const request = await createInvoice();
      const preview = await payer('POST', '/api/lightning/payments/initiate', { request });
      if (!preview.route_found) throw new Error('no internal route to the payee');
      return pay(request);
    };
    // The issue's measure, a payment from POST to paid: invoices the payee issued beforehand (issuing
    // them is the payee's work, benchmarked in lightning-invoices.ts), each paid by one request.
    const issuedInvoices: string[] = [];
    const issueInvoices = async () => {
      // Enough for a measurement at 20 payments/s; should they run out, the rest issue their own (slower, never faster).
      const count = Math.min(FLOWS_PER_ROUND, BENCH_SECONDS * 20);
      while (issuedInvoices.length < count) {
        issuedInvoices.push(...(await Promise.all(Array.from({ length: Math.min(FLOWS_IN_FLIGHT, count - issuedInvoices.length) }, createInvoice))));
      }
    };
    const payIssued = async () => pay(issuedInvoices.pop() ?? (await createInvoice()));

    const subscriber = await organization('Benchmark webhooks');
    const endpoint = await subscriber('POST', '/v1/webhooks', { name: 'Benchmark receiver', url: `${urlOf(receiver)}/hooks` });
    const deliverTestEvent = async () => {
      const delivery = await subscriber('POST', `/v1/webhooks/${endpoint.id}/test`);
      const workflowId = `webhook-delivery-${delivery.id}-1`;
      const result = await awaitWorkflow<{ outcome: string }>(workflowId);
      if (result.outcome !== 'delivered') throw new Error(`webhook delivery ended ${result.outcome}`);
      return workflowId;
    };

    let bareRuns = 0;
    const bareOf =
      (shape: BareShape): Flow =>
      async () => {
        const workflowId = `bench-bare-${(bareRuns += 1)}-${randomUUID()}`;
        await client.workflow.execute('bareWorkflow', bareStart(workflowId, shape));
        return workflowId;
      };

    const bareFunding: Flow = async () => {
      const response = await fetch(`${urlOf(bareService)}/fundings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ amount: 100 }) });
      if (!response.ok) throw new Error(`bare funding: ${response.status}`);
      const { workflow_id: workflowId } = (await response.json()) as { workflow_id: string };
      await awaitWorkflow(workflowId);
      return workflowId;
    };
    const BARE_FUNDING = 'bare HTTP request, write and workflow of the card funding\'s shape (no code of ours)';

    /** What one flow costs, from COST_SAMPLES run one at a time: SQL statements, and the last one's workflow history. */
    const costs: FlowCost[] = [];
    const measureCost = async (target: string, httpRequests: number, flow: Flow) => {
      const before = sqlStatements;
      let workflowId = '';
      for (let sample = 0; sample < COST_SAMPLES; sample += 1) workflowId = await flow();
      const statements = (sqlStatements - before) / COST_SAMPLES;
      const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
      const cost = {
        target,
        http_requests: httpRequests,
        sql_statements: statements,
        history_events: events.length,
        workflow_tasks: events.filter((event) => event.workflowTaskCompletedEventAttributes).length,
        activity_tasks: events.filter((event) => event.activityTaskScheduledEventAttributes).length,
        local_activities: events.filter((event) => event.markerRecordedEventAttributes?.markerName === 'core_local_activity').length,
      };
      costs.push(cost);
      return cost;
    };
    /** The bare workflow of a flow's shape, and its name in the tables. */
    const ceilingOf = (flow: string, cost: FlowCost) => {
      const shape = { activities: cost.activity_tasks, localActivities: cost.local_activities };
      return { target: `bare workflow, ${shape.activities} activities and ${shape.localActivities} local (the ceiling of ${flow})`, run: bareOf(shape) };
    };

    // Warm-up: the workflow caches, the JIT and the pools, without measuring.
    const warmUpBare = [bareOf({ activities: 1, localActivities: 0 }), bareOf({ activities: 0, localActivities: 1 })];
    for (const flow of [...warmUpBare, bareFunding, fundCard, ...(FUNDING_ONLY ? [] : [invoiceAndPay, deliverTestEvent])]) await measureFlows('warm-up', 0, flow, BENCH_SECONDS, FLOWS_IN_FLIGHT * 2);

    const measure = (target: string, flow: Flow, before?: () => Promise<void>) => ({
      target,
      measure: async (round: number) => {
        await before?.();
        return measureFlows(target, round, flow);
      },
    });
    const FUNDING = 'card funding: POST /api/cards/:cardId/balance → completed';
    const PAYMENT = 'internal Lightning payment: POST /api/lightning/payments → paid (invoice issued before)';
    const PAYMENT_TRIP = 'internal Lightning payment with its invoice: invoice, initiate, pay → paid';
    const WEBHOOK = 'webhook: POST /v1/webhooks/:id/test → delivered';
    const fundingCeiling = ceilingOf('card funding', await measureCost('card funding', 1, fundCard));
    const fundingRatio = { name: 'card fundings/s / bare workflows of their shape/s (medians)', goal: 0.9 };
    const fundingShapeRatios = (rows: FlowMeasurement[]) => [
      { name: "card fundings/s / bare HTTP request, write and workflow of the funding's shape/s (medians)", value: medianOf(rows, FUNDING, 'per_second') / medianOf(rows, BARE_FUNDING, 'per_second') },
      { name: "bare HTTP request, write and workflow of the funding's shape/s / bare workflows of the funding's shape/s (medians)", value: medianOf(rows, BARE_FUNDING, 'per_second') / medianOf(rows, fundingCeiling.target, 'per_second') },
    ];
    if (FUNDING_ONLY) {
      const rows = await alternate([measure(fundingCeiling.target, fundingCeiling.run), measure(BARE_FUNDING, bareFunding), measure(FUNDING, fundCard)]);
      const value = medianOf(rows, FUNDING, 'per_second') / medianOf(rows, fundingCeiling.target, 'per_second');
      console.log('\nWhat one flow costs (SQL statements from the first request to the result, averaged over flows run one at a time):');
      console.table(costs);
      await report('flows-funding', rows, [{ ...fundingRatio, value }, ...fundingShapeRatios(rows)], { costs, funding_only: true, flows_per_round: FLOWS_PER_ROUND, in_flight: FLOWS_IN_FLIGHT, seconds: BENCH_SECONDS });
      return;
    }
    await issueInvoices();
    const paymentCeiling = ceilingOf('internal Lightning payment', await measureCost('internal Lightning payment', 1, payIssued));
    const tripCeiling = ceilingOf('internal Lightning payment with its invoice', await measureCost('internal Lightning payment with its invoice and preview', 3, invoiceAndPay));
    const webhookCeiling = ceilingOf('webhook delivery', await measureCost('webhook delivery', 1, deliverTestEvent));

    const pairs = [
      { flow: FUNDING, run: fundCard, ceiling: fundingCeiling, shaped: { target: BARE_FUNDING, run: bareFunding } },
      { flow: PAYMENT, run: payIssued, ceiling: paymentCeiling, before: issueInvoices },
      { flow: PAYMENT_TRIP, run: invoiceAndPay, ceiling: tripCeiling },
      { flow: WEBHOOK, run: deliverTestEvent, ceiling: webhookCeiling },
    ];
    const rows: FlowMeasurement[] = await alternate(
      pairs.flatMap(({ flow, run, ceiling, shaped, before }) => [measure(ceiling.target, ceiling.run), ...(shaped ? [measure(shaped.target, shaped.run)] : []), measure(flow, run, before)]),
    );

    // Dead endpoints: every funding of this organization emits an event to 12 endpoints that hold each attempt until its timeout.
    const deadOrganization = await organization('Benchmark dead endpoints');
    for (let index = 0; index < DEAD_ENDPOINTS; index += 1) await deadOrganization('POST', '/v1/webhooks', { name: `Silent ${index}`, url: silent.url });
    const fundDeadCard = funding(deadOrganization, await cardsOf(deadOrganization));
    await measureCost(`card funding, ${DEAD_ENDPOINTS} dead endpoints, circuits closed`, 1, fundDeadCard);
    // The issue's case is endpoints that have failed for a long time: fund until every dead endpoint's
    // circuit is open (WEBHOOK_CIRCUIT_FAILURES timed-out attempts, a probe pending), so that what is
    // measured is the steady state in which each event costs a held row per endpoint and no workflow.
    // How long the endpoints took to get there, and the fundings' rate meanwhile, are reported beside it.
    const openCircuits = async () => {
      const [row] = await orm.em.fork().execute<{ open: string }[]>(
        `select count(*) as open from webhook_endpoints e join event_deliveries d on d.id = e.probe_delivery_id and d.status = 'pending' where e.url = ?`,
        [silent.url],
      );
      return Number(row!.open);
    };
    const openingStarted = performance.now();
    const opening: FlowMeasurement[] = [];
    while ((await openCircuits()) < DEAD_ENDPOINTS) {
      if (performance.now() - openingStarted > 180_000) throw new Error(`the dead endpoints' circuits did not all open within 180 s (${await openCircuits()} of ${DEAD_ENDPOINTS})`);
      opening.push(await measureFlows(`card funding, ${DEAD_ENDPOINTS} dead endpoints, circuits opening`, 0, fundDeadCard, 2));
    }
    const secondsSince = (start: number) => Number(((performance.now() - start) / 1000).toFixed(1));
    const openedAfter = secondsSince(openingStarted);
    const openingRate = median(opening.map((row) => row.per_second));
    console.log(`the ${DEAD_ENDPOINTS} dead endpoints' circuits opened after ${openedAfter} s of fundings (${openingRate}/s meanwhile)`);
    // The deliveries started before the circuits opened still have an attempt hanging (10 s each, as
    // many as the webhooks worker has slots); once those have ended and paused, the endpoints are in
    // the steady state: no attempt ended for twice an attempt's timeout.
    const attemptsEnded = async () => {
      const [row] = await orm.em.fork().execute<{ attempts: string }[]>(
        `select count(*) as attempts from event_delivery_attempts a join event_deliveries d on d.id = a.delivery_id where d.destination_url = ?`,
        [silent.url],
      );
      return Number(row!.attempts);
    };
    const settlingStarted = performance.now();
    for (let quietSince = performance.now(), attempts = await attemptsEnded(); performance.now() - quietSince < 20_000; ) {
      if (performance.now() - settlingStarted > 300_000) throw new Error('the attempts started before the circuits opened did not end within 300 s');
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const now = await attemptsEnded();
      if (now !== attempts) [attempts, quietSince] = [now, performance.now()];
    }
    const settledAfter = secondsSince(settlingStarted);
    const circuitsOpening = { seconds: openedAfter, fundings_per_second: openingRate, attempts_settled_after_seconds: settledAfter };
    console.log(`their attempts in flight ended and paused ${settledAfter} s later`);
    await measureCost(`card funding, ${DEAD_ENDPOINTS} dead endpoints, circuits open`, 1, fundDeadCard);
    const CEILING_BACKLOG = `${fundingCeiling.target}, dead backlog running`;
    const FUNDING_NONE = 'card funding, organization without endpoints (with the dead backlog running)';
    const FUNDING_DEAD = `card funding, organization with ${DEAD_ENDPOINTS} endpoints that never answer (circuits open)`;
    rows.push(...(await alternate([measure(CEILING_BACKLOG, fundingCeiling.run), measure(FUNDING_NONE, fundCard), measure(FUNDING_DEAD, fundDeadCard)])));
    // How many of the dead endpoints' deliveries their open circuits held (no workflow started) by the end.
    const [dead] = await orm.em.fork().execute<{ total: string; held: string }[]>(
      `select count(*) as total, count(*) filter (where held_by_circuit) as held from event_deliveries where destination_url = ?`,
      [silent.url],
    );
    const deadDeliveries = { total: Number(dead!.total), held: Number(dead!.held) };
    console.log(`deliveries to the dead endpoints: ${deadDeliveries.total}, held by their open circuits without a workflow: ${deadDeliveries.held}`);

    const rate = (target: string) => medianOf(rows, target, 'per_second');
    const ofCeiling = (flow: string, ceiling: { target: string }) => rate(flow) / rate(ceiling.target);
    const ratios = [
      { ...fundingRatio, value: ofCeiling(FUNDING, fundingCeiling) },
      ...fundingShapeRatios(rows),
      { name: 'internal Lightning payments/s / bare workflows of their shape/s (medians)', value: ofCeiling(PAYMENT, paymentCeiling), goal: 0.5 },
      { name: 'internal Lightning payments with their invoice and preview/s / bare workflows of their shape/s (medians)', value: ofCeiling(PAYMENT_TRIP, tripCeiling) },
      { name: 'webhook deliveries/s / bare workflows of their shape/s (medians)', value: ofCeiling(WEBHOOK, webhookCeiling), goal: 0.5 },
      { name: `card fundings/s with ${DEAD_ENDPOINTS} dead endpoints / without (medians, same rounds)`, value: rate(FUNDING_DEAD) / rate(FUNDING_NONE), goal: 0.8 },
      { name: `card fundings/s with ${DEAD_ENDPOINTS} dead endpoints / their bare workflows/s, dead backlog running (medians)`, value: rate(FUNDING_DEAD) / rate(CEILING_BACKLOG), goal: 0.5 },
      {
        name: 'card fundings/s / their bare workflows/s, dead backlog running / before it (medians)',
        value: rate(FUNDING_NONE) / rate(CEILING_BACKLOG) / ofCeiling(FUNDING, fundingCeiling),
      },
    ];
    console.log('\nWhat one flow costs (SQL statements from the first request to the result, averaged over flows run one at a time):');
    console.table(costs);
    await report('flows', rows, ratios, {
      costs,
      flows_per_round: FLOWS_PER_ROUND,
      in_flight: FLOWS_IN_FLIGHT,
      seconds: BENCH_SECONDS,
      worker: { max_activities: config.WORKER_MAX_ACTIVITIES, max_workflow_tasks: config.WORKER_MAX_WORKFLOW_TASKS, cached_workflows: config.WORKER_CACHED_WORKFLOWS },
      rss_end_mib: Math.round(process.memoryUsage().rss / MiB),
      dead_deliveries: deadDeliveries,
      circuits_opening: circuitsOpening,
    });
  } finally {
    // The silent server's sockets close first, so the deliveries hanging on them end and the workers drain quickly.
    await silent.close();
    receiver.close();
    service.close();
    bareService.close();
    workers.shutdown();
    bareWorker.shutdown();
    await running;
    await deps.keyCache.stop();
    await nativeConnection.close();
    await deps.temporal.connection.close();
    await barePool.end();
    await orm.close();
  }
}

runBenchmark(main);
