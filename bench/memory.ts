import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config';
import { eventually } from '../test/support/eventually';
import { freeLoopbackPort } from '../test/support/ports';
import { sandboxPayerAndPayee } from '../test/support/sandbox-organizations';
import { ServiceProcess, whileRunning } from '../test/support/service-process';
import { WebhookReceiver } from '../test/support/webhook-receiver';
import { BENCH_CARD_BODY, BENCH_SECONDS, callerFor, type Caller, report, runBenchmark, serviceProcessEnv } from './support';

/**
 * Resident memory of the API and the worker, the real processes (`dist/src/server.js`,
 * `dist/src/worker.js`) as the compose file runs them, under a bounded mixed load for
 * BENCH_MEMORY_SECONDS (default ten minutes; six times BENCH_SECONDS when only that is set): reads,
 * card creations and fundings, Lightning invoices and internal payments, webhook deliveries to a
 * local receiver. RSS is read from /proc/<pid>/status; the goal is under 350 MiB (issue 53; 400 before) for both together
 * at the end. The load is a fixed rate, not a maximum: what grows with time is what we look for.
 */
const MEMORY_SECONDS = Number(process.env.BENCH_MEMORY_SECONDS ?? (process.env.BENCH_SECONDS ? 6 * BENCH_SECONDS : 600));
const GOAL_MIB = 350;
const OPERATIONS_PER_SECOND = 30;
const MAX_IN_FLIGHT = 16;
const SAMPLE_SECONDS = Math.min(5, Math.max(1, MEMORY_SECONDS / 60));

/** VmRSS of a process in MiB. */
async function rssMib(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (!kib) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(kib[1]) / 1024;
}

/** The benchmarks' customer with an id number of its own per card. */
const customer = () => ({ ...BENCH_CARD_BODY.customer, id_number: `P${randomUUID().replace(/\D/g, '').slice(0, 7).padEnd(7, '0')}` });

async function main() {
  const config = loadConfig(process.env);
  const { payer, payee } = await sandboxPayerAndPayee(config.DATABASE_URL, 'Memory');

  const receiver = await new WebhookReceiver().start();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'custody-bench-memory-'));
  const port = await freeLoopbackPort();
  const env = serviceProcessEnv(dataDir, `bench-memory-${randomUUID()}`);
  const api = new ServiceProcess('api', 'server.js', { ...env, HOST: '127.0.0.1', PORT: String(port) });
  const worker = new ServiceProcess('worker', 'worker.js', env);
  try {
    await whileRunning([api, worker], () => run(`http://127.0.0.1:${port}`, api, worker, callerFor(`http://127.0.0.1:${port}`, payer), callerFor(`http://127.0.0.1:${port}`, payee), receiver));
  } finally {
    await receiver.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

async function run(url: string, api: ServiceProcess, worker: ServiceProcess, asPayer: Caller, asPayee: Caller, receiver: WebhookReceiver) {
  await eventually(async () => ((await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined), 'the API ready', 60_000, 200);

  // Fixtures: money to spend, a webhook endpoint per organization (every event type), one active card (the worker is up).
  await asPayer('POST', '/v1/sandbox/balances', { amount: '1000000000000', currency: 'USD', reference: randomUUID() });
  await asPayer('POST', '/v1/sandbox/balances', { amount: '1000000000000', currency: 'sat', reference: randomUUID() });
  const webhookId = (await asPayer('POST', '/v1/webhooks', { name: 'Memory', url: receiver.url })).id as string;
  await asPayee('POST', '/v1/webhooks', { name: 'Memory', url: receiver.url });
  const cards: string[] = [];
  const activeCards: string[] = [];
  const createCard = async () => {
    const created = await asPayer('POST', '/api/cards', { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Memory card', customer: customer() });
    cards.push(created.data.card.id as string);
  };
  const readCard = async () => {
    const id = cards[Math.floor(Math.random() * cards.length)]!;
    const read = await asPayer('GET', `/api/cards/${id}`);
    if (read.data.card.status === 'active' && !activeCards.includes(id)) activeCards.push(id);
  };
  await createCard();
  await eventually(async () => (await readCard(), activeCards.length > 0 ? true : undefined), 'the first card active (the worker up)', 120_000, 500);

  const operations: { name: string; weight: number; run: () => Promise<unknown> }[] = [
    { name: 'GET /v1/api-keys/me', weight: 3, run: () => asPayer('GET', '/v1/api-keys/me') },
    { name: 'GET /v1/balances', weight: 2, run: () => asPayer('GET', '/v1/balances') },
    { name: 'GET /api/cards/:cardId', weight: 3, run: readCard },
    { name: 'GET /api/lightning/invoices', weight: 1, run: () => asPayee('GET', '/api/lightning/invoices') },
    { name: 'POST /api/cards', weight: 2, run: createCard },
    {
      name: 'POST /api/cards/:cardId/balance (fund)',
      weight: 3,
      run: () => asPayer('POST', `/api/cards/${activeCards[Math.floor(Math.random() * activeCards.length)]!}/balance`, { type: 'fund', amount: 100, reference: randomUUID() }),
    },
    { name: 'POST /api/lightning/invoices (left unpaid)', weight: 1, run: () => asPayee('POST', '/api/lightning/invoices', { amount: 1000, description: 'unpaid', reference: randomUUID() }) },
    {
      name: 'Lightning invoice + internal payment',
      weight: 3,
      run: async () => {
        const invoice = await asPayee('POST', '/api/lightning/invoices', { amount: 1500, description: 'coffee', reference: randomUUID() });
        await asPayer('POST', '/api/lightning/payments', { request: invoice.request, reference: randomUUID() });
      },
    },
    { name: 'POST /v1/webhooks/:id/test', weight: 1, run: () => asPayer('POST', `/v1/webhooks/${webhookId}/test`) },
  ];
  const stats = new Map(operations.map((operation) => [operation.name, { operation: operation.name, completed: 0, failed: 0 }]));
  const totalWeight = operations.reduce((sum, operation) => sum + operation.weight, 0);
  const pick = () => {
    let ticket = Math.random() * totalWeight;
    return operations.find((operation) => (ticket -= operation.weight) < 0) ?? operations[0]!;
  };

  const samples: { seconds: number; api: number; worker: number }[] = [];
  const startedAt = Date.now();
  const sample = async () => samples.push({ seconds: (Date.now() - startedAt) / 1000, api: await rssMib(api.pid), worker: await rssMib(worker.pid) });
  await sample();

  let inFlight = 0;
  let skipped = 0;
  let lastFailure = '';
  const running = new Set<Promise<void>>();
  const fire = () => {
    if (inFlight >= MAX_IN_FLIGHT) {
      skipped += 1;
      return;
    }
    const operation = pick();
    const entry = stats.get(operation.name)!;
    inFlight += 1;
    const done = operation.run().then(
      () => void (entry.completed += 1),
      (error: unknown) => {
        entry.failed += 1;
        lastFailure = (error as Error).message;
      },
    );
    const tracked = done.finally(() => {
      inFlight -= 1;
      running.delete(tracked);
    });
    running.add(tracked);
  };
  const load = setInterval(fire, 1000 / OPERATIONS_PER_SECOND);
  const sampling = setInterval(() => void sample(), SAMPLE_SECONDS * 1000);
  try {
    await new Promise((resolve) => setTimeout(resolve, MEMORY_SECONDS * 1000));
  } finally {
    clearInterval(load);
    clearInterval(sampling);
  }
  await Promise.all(running);
  await sample();

  const operationRows = [...stats.values()];
  console.table(operationRows);
  const completed = operationRows.reduce((sum, row) => sum + row.completed, 0);
  const failed = operationRows.reduce((sum, row) => sum + row.failed, 0);
  if (completed === 0 || failed > completed / 10) throw new Error(`${failed} of ${completed + failed} operations failed; the last: ${lastFailure}`);

  const round = (mib: number) => Math.round(mib * 10) / 10;
  const first = samples[0]!;
  const last = samples.at(-1)!;
  const rows = (['api', 'worker'] as const).map((name) => ({
    process: name,
    rss_start_mib: round(first[name]),
    rss_peak_mib: round(Math.max(...samples.map((each) => each[name]))),
    rss_end_mib: round(last[name]),
  }));
  const endSum = last.api + last.worker;
  const peakSum = Math.max(...samples.map((each) => each.api + each.worker));
  console.log(
    `${MEMORY_SECONDS} s at ${OPERATIONS_PER_SECOND} operations/s (at most ${MAX_IN_FLIGHT} in flight): ${completed} completed, ${failed} failed, ${skipped} not started (all slots busy); ` +
      `${receiver.attempts.length} webhook deliveries received; API + worker RSS ${round(first.api + first.worker)} MiB at start, ${round(peakSum)} MiB at peak, ${round(endSum)} MiB at the end`,
  );
  await report(
    'memory',
    rows,
    [
      { name: `${GOAL_MIB} MiB / (API + worker RSS after ${MEMORY_SECONDS} s of mixed load)`, value: GOAL_MIB / endSum, goal: 1 },
      { name: `${GOAL_MIB} MiB / (API + worker RSS at peak)`, value: GOAL_MIB / peakSum },
      { name: 'RSS at start / RSS at the end (API + worker)', value: (first.api + first.worker) / endSum },
    ],
    { seconds: MEMORY_SECONDS, operations_per_second: OPERATIONS_PER_SECOND, max_in_flight: MAX_IN_FLIGHT, operations: operationRows, skipped, webhook_deliveries: receiver.attempts.length, samples },
  );
}

runBenchmark(main);
