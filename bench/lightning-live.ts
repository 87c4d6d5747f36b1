import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createApiKey } from '../src/api-keys/service';
import { loadConfig } from '../src/config';
import { createOrm, migrate } from '../src/db/orm';
import { createOrganization } from '../src/organizations/service';
import { eventually } from '../test/support/eventually';
import { lndLiveConfig, startLoneLnd } from '../test/support/lnd';
import { freeLoopbackPort } from '../test/support/ports';
import { descendantsOf, processIds, processStat } from '../test/support/proc-stat';
import { ServiceProcess, whileRunning } from '../test/support/service-process';
import { alternate, measureHttp, medianOf, report, runBenchmark, serviceProcessEnv, type Ratio } from './support';

/**
 * Invoice creation on the live path in front of a real LND, each side on a core of its own (issue 53): LND pinned to the
 * last CPU (`taskset`); on the others, everything of ours as `npm start` runs it (the API and worker processes, PostgreSQL,
 * the Temporal dev server) and this process with its load generator. Rounds alternate LND's own REST AddInvoice, called
 * straight, with ours (POST /api/lightning/invoices with a live key: authentication, the invoice row and its expiry's
 * durable start, and that same AddInvoice), at 10 and 50 connections. Goal: ours ≥ 0.9 of LND's own — in front of a
 * node, our service is never the bottleneck.
 */
const AMOUNT_SAT = 1000;
const CONNECTIONS = [10, 50];
const GOAL = 0.9;

/** `taskset` every thread of a process (its later threads follow the thread that makes them; its children, it). */
function pin(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-cp', cpus, String(pid)], { stdio: 'ignore' });
}

async function pinTree(root: number, cpus: string): Promise<void> {
  for (const pid of [root, ...descendantsOf(root)]) {
    try {
      pin(pid, cpus);
    } catch {
      // Gone since the listing (a backend that ended): nothing to pin.
    }
  }
}

/** The pid of the process whose command line has every one of `parts` (the Temporal dev server scripts/bench.sh started). */
async function processWith(parts: string[]): Promise<number> {
  for (const entry of processIds()) {
    const args = (await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (parts.every((part) => args.includes(part))) return Number(entry);
  }
  throw new Error(`no process with ${parts.join(' ')} in its command line`);
}

async function main() {
  const cpuCount = os.availableParallelism();
  if (cpuCount < 2) throw new Error(`this benchmark gives LND a CPU of its own and ours the rest: it needs 2 CPUs, this machine has ${cpuCount}`);
  const lndCpus = String(cpuCount - 1);
  const ourCpus = cpuCount === 2 ? '0' : `0-${cpuCount - 2}`;
  // First this process: what it starts from now on (the load generator, our processes, btcd) starts on our CPUs.
  pin(process.pid, ourCpus);

  const config = loadConfig(process.env);
  const orm = await createOrm(config.DATABASE_URL, 2);
  await migrate(orm);
  const em = orm.em.fork();
  const { secret } = createApiKey(em, { organization: createOrganization(em, 'Live invoices'), name: 'Benchmark', scopes: ['*'], environment: 'live' });
  await em.flush();
  // PostgreSQL and the Temporal dev server, started by scripts/bench.sh: the postmaster's tree (its later backends follow it).
  const [checkpointer] = await em.getConnection().execute<{ pid: number }[]>(`select pid from pg_stat_activity where backend_type = 'checkpointer'`);
  const postmaster = processStat(checkpointer!.pid)!.ppid;
  await orm.close();
  await pinTree(postmaster, ourCpus);
  await pinTree(await processWith(['start-dev', '--port', config.TEMPORAL_ADDRESS.split(':').at(-1)!]), ourCpus);

  const lone = await startLoneLnd();
  if ('missing' in lone) throw new Error(`LND is needed here: ${lone.missing} (scripts/ensure-tools.sh builds it)`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'custody-bench-lightning-live-'));
  const port = await freeLoopbackPort();
  // Live keys need key custody of the operator's own (a data key and a seed key): this run's, random, gone with it.
  const keys = { MASTER_KEY: randomBytes(32).toString('hex'), SEED_MASTER_KEY: randomBytes(32).toString('hex') };
  const env = { ...serviceProcessEnv(dataDir, `bench-lightning-live-${randomUUID()}`), ...lndLiveConfig(lone.lnd), ...keys };
  const processes = [new ServiceProcess('api', 'server.js', { ...env, HOST: '127.0.0.1', PORT: String(port) }), new ServiceProcess('worker', 'worker.js', env)];
  try {
    pin(lone.lnd.pid, lndCpus);
    await whileRunning(processes, () => measure(`http://127.0.0.1:${port}`, secret, lone.lnd, { lnd: lndCpus, ours: ourCpus }));
  } finally {
    await lone.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

async function measure(url: string, secret: string, lnd: { restUrl: string; macaroonPath: string }, cpus: { lnd: string; ours: string }) {
  await eventually(async () => ((await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined), 'the API ready', 60_000, 200);
  const ours = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
  // LND's REST gateway takes the admin macaroon, hex, in this header (the load generator accepts its self-signed certificate).
  const lndHeaders = { 'grpc-metadata-macaroon': (await readFile(lnd.macaroonPath)).toString('hex'), 'content-type': 'application/json' };
  // The live path end to end before measuring: a live invoice made by that node.
  const first = await fetch(`${url}/api/lightning/invoices`, { method: 'POST', headers: ours, body: JSON.stringify({ amount: AMOUNT_SAT, description: 'Benchmark', reference: randomUUID() }) });
  const invoice = (await first.json()) as { request?: string };
  if (!first.ok || !invoice.request?.startsWith('lnbcrt')) throw new Error(`the live path made no regtest invoice: ${first.status} ${JSON.stringify(invoice)}`);

  const ourCreate = (connections: number) => `ours, live: POST /api/lightning/invoices (${connections} conn)`;
  const lndCreate = (connections: number) => `LND: POST /v1/invoices, AddInvoice (${connections} conn)`;
  const rows = await alternate(
    CONNECTIONS.flatMap((connections) => [
      {
        target: ourCreate(connections),
        measure: () =>
          measureHttp(ourCreate(connections), `${url}/api/lightning/invoices`, {
            method: 'POST',
            headers: ours,
            uniqueBody: JSON.stringify({ amount: AMOUNT_SAT, description: 'Benchmark', reference: '[<unique>]' }),
            connections,
          }),
      },
      {
        target: lndCreate(connections),
        measure: () => measureHttp(lndCreate(connections), `${lnd.restUrl}/v1/invoices`, { method: 'POST', headers: lndHeaders, body: JSON.stringify({ value: String(AMOUNT_SAT), memo: 'Benchmark' }), connections }),
      },
    ]),
  );
  const rate = (target: string) => medianOf(rows, target, 'requests_per_second');
  const ratios: Ratio[] = CONNECTIONS.map((connections) => ({
    name: `live invoice creation, ours / LND AddInvoice, LND on a CPU of its own (${connections} conn, medians)`,
    value: rate(ourCreate(connections)) / rate(lndCreate(connections)),
    goal: GOAL,
  }));
  await report('lightning-live', rows, ratios, { lnd: 'lnd on btcd regtest, REST AddInvoice, no channels', lnd_cpus: cpus.lnd, our_cpus: cpus.ours });
}

runBenchmark(main);
