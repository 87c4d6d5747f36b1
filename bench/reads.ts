import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import pg from 'pg';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createApiKey } from '../src/api-keys/service';
import { loadConfig } from '../src/config';
import { createOrm, migrate, type Orm } from '../src/db/orm';
import { createApp } from '../src/http/app';
import { routeModules } from '../src/modules';
import { createOrganization } from '../src/organizations/service';
import { createAppDeps } from '../src/runtime';
import { creditWallet } from '../test/support/bursts';
import { eventually } from '../test/support/eventually';
import { freeLoopbackPort } from '../test/support/ports';
import { ServiceProcess } from '../test/support/service-process';
import type { BareRead, BareSetup, RecordedStatement } from './reads-bare';
import { alternate, BENCH_CARD_BODY, callerFor, listen, measureHttp, medianOf, report, runBenchmark, serviceLogger, serviceProcessEnv, urlOf } from './support';

/**
 * Issue 53's hot reads (the key, a wallet's balances, a card, a send, an invoice) against bare reads of their own
 * shape. What is measured is the API as `npm start` runs it: `dist/src/server.js` in a process of its own, with the
 * service's V8 options, logging at LOG_LEVEL to a pipe this process reads, PostgreSQL durable, rate limits lifted.
 * Each read's ceiling, in another process of its own (bench/reads-bare.ts), is a bare Koa + pg route sending the very
 * statements our read sends (recorded from one of our requests, in this process: text, values, and a name where
 * ours prepares one) and answering the same body. What a bare read leaves out is what the ratio prices:
 * authentication, rate limit, validation, our middleware, access log and metrics, and turning rows into the
 * resource. Two more rows bound what our code costs before any read: the floor of a request (a bare Koa route
 * answering a small body, no database) and an authenticated route of ours that reads nothing. Rounds alternate
 * every ceiling with every target; ratios are of medians. BENCH_SERVICE_NODE_FLAGS adds node flags to the API's
 * (`--cpu-prof --cpu-prof-dir=…` profiles it alone); BENCH_READS (names, comma-separated: key, balances, card,
 * send, invoice) measures only those reads.
 */
const GOAL = 0.7;

async function main() {
  const config = loadConfig({ ...process.env, RATE_LIMIT_BURST: '1000000000', RATE_LIMIT_PER_SECOND: '1000000000' });
  const orm = await createOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  await migrate(orm);
  const em = orm.em.fork();
  const organization = createOrganization(em, 'Benchmark');
  const { secret } = createApiKey(em, { organization, name: 'Benchmark', scopes: ['*'], environment: 'sandbox' });
  await em.flush();
  const headers = { authorization: `Bearer ${secret}` };

  // The app in this process makes the fixtures and records what each read sends and answers; it measures nothing.
  const deps = createAppDeps(config, orm, serviceLogger(config.LOG_LEVEL));
  const recorder = await listen(createApp(deps, routeModules).app);
  const fixtures = await readFixtures(urlOf(recorder), secret, orm);
  const only = process.env.BENCH_READS?.split(',').map((name) => name.trim());
  const reads = [
    { name: 'key', target: 'GET /v1/api-keys/me', path: '/v1/api-keys/me' },
    { name: 'balances', target: 'GET /v1/wallets/:id/balances', path: `/v1/wallets/${fixtures.walletId}/balances` },
    { name: 'card', target: 'GET /api/cards/:cardId', path: `/api/cards/${fixtures.cardId}` },
    { name: 'send', target: 'GET /v1/transactions/:id', path: `/v1/transactions/${fixtures.transactionId}` },
    { name: 'invoice', target: 'GET /api/lightning/invoices/:id', path: `/api/lightning/invoices/${fixtures.invoiceId}` },
  ].filter((read) => !only || only.includes(read.name));
  const bareReads: BareRead[] = [];
  for (const read of reads) bareReads.push({ path: read.path, ...(await recordRead(`${urlOf(recorder)}${read.path}`, headers)) });
  recorder.close();
  await deps.keyCache.stop();
  await deps.temporal.connection.close();
  await orm.close();

  const port = await freeLoopbackPort();
  const env = serviceProcessEnv(config.DATA_DIR, `bench-reads-${randomUUID()}`);
  const api = new ServiceProcess('api', 'server.js', {
    ...env,
    RATE_LIMIT_BURST: '1000000000',
    RATE_LIMIT_PER_SECOND: '1000000000',
    HOST: '127.0.0.1',
    PORT: String(port),
    NODE_OPTIONS: `${env.NODE_OPTIONS} ${process.env.BENCH_SERVICE_NODE_FLAGS ?? ''}`.trim(),
  });
  const bare = fork(path.join(__dirname, 'reads-bare.js'), { execArgv: process.env.SERVICE_NODE_OPTIONS!.split(' ').filter(Boolean) });
  const killAll = () => {
    void api.kill();
    bare.kill('SIGKILL');
  };
  process.once('exit', killAll);
  try {
    const service = `http://127.0.0.1:${port}`;
    await eventually(async () => ((await fetch(`${service}/readyz`).catch(() => undefined))?.ok ? true : undefined), 'the API ready', 60_000, 200);
    const baseline = `http://127.0.0.1:${await bareListening(bare, { databaseUrl: config.DATABASE_URL, poolMax: config.DATABASE_POOL_MAX, reads: bareReads })}`;
    // What each bare read replays, in the result: the statements' texts and whether ours prepares them.
    const shapes = reads.map(({ target }, index) => ({ target, statements: bareReads[index]!.statements.map(({ name, text }) => ({ prepared: name !== undefined, text })) }));
    await measure(reads, service, baseline, headers, api.pid, bare.pid!, shapes);
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${api.log}`);
  } finally {
    process.removeListener('exit', killAll);
    bare.disconnect();
    await once(bare, 'exit');
    await api.stop();
  }
}

const bareOf = (target: string) => `bare read of its statements and body: ${target}`;

async function measure(reads: { target: string; path: string }[], service: string, baseline: string, headers: Record<string, string>, apiPid: number, barePid: number, shapes: object[]) {
  const FLOOR = 'bare Koa route, no database (the floor of a request)';
  const AUTHENTICATED = 'GET /v1/chains/bitcoin (authenticated, no read)';
  const HEALTHZ = 'GET /healthz (middleware, no database)';
  const rows = await alternate([
    ...reads.map(({ target, path: readPath }) => ({ target: bareOf(target), measure: () => measureHttp(bareOf(target), `${baseline}${readPath}`, { serverCpu: barePid }) })),
    ...reads.map(({ target, path: readPath }) => ({ target, measure: () => measureHttp(target, `${service}${readPath}`, { headers, serverCpu: apiPid }) })),
    { target: HEALTHZ, measure: () => measureHttp(HEALTHZ, `${service}/healthz`, { serverCpu: apiPid }) },
    { target: AUTHENTICATED, measure: () => measureHttp(AUTHENTICATED, `${service}/v1/chains/bitcoin`, { headers, serverCpu: apiPid }) },
    { target: FLOOR, measure: () => measureHttp(FLOOR, `${baseline}/floor`, { serverCpu: barePid }) },
  ]);
  // Throughput is the goal; CPU per request says the same with far less noise on a shared machine.
  const throughput = (target: string, ceiling: string) => medianOf(rows, target, 'requests_per_second') / medianOf(rows, ceiling, 'requests_per_second');
  const cpu = (target: string, ceiling: string) => medianOf(rows, ceiling, 'server_cpu_us_per_request') / medianOf(rows, target, 'server_cpu_us_per_request');
  const ratios = [
    ...reads.map(({ target }) => ({ name: `${target} / ${bareOf(target)} (medians)`, value: throughput(target, bareOf(target)), goal: GOAL })),
    ...reads.map(({ target }) => ({ name: `its bare read's CPU / ${target} CPU, per request (medians)`, value: cpu(target, bareOf(target)) })),
    { name: `${AUTHENTICATED} / ${FLOOR} (medians)`, value: throughput(AUTHENTICATED, FLOOR) },
    { name: `${AUTHENTICATED} CPU / ${FLOOR} CPU, per request (medians)`, value: 1 / cpu(AUTHENTICATED, FLOOR) },
  ];
  await report('reads', rows, ratios, { api: 'dist/src/server.js in a process of its own', bare: 'bench/reads-bare.ts in a process of its own', shapes });
}

/** Sends the bare process its routes; resolves with the port it listens on. */
async function bareListening(bare: ChildProcess, setup: BareSetup): Promise<number> {
  const listening = once(bare, 'message') as Promise<[{ port: number }]>;
  bare.send(setup);
  const [{ port }] = await listening;
  return port;
}

/**
 * One of our reads: the statements it sent (every `pg` query while it ran is recorded; nothing else runs then) and
 * the body it answered, parsed: what the bare read of its shape replays. A request may also take rate-limit tokens
 * or note the key's last use: of ten requests, the one with the fewest statements is the read alone.
 */
async function recordRead(url: string, headers: Record<string, string>): Promise<{ statements: RecordedStatement[]; body: unknown }> {
  let statements: RecordedStatement[] = [];
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const [config, values] = args as [string | { name?: string; text: string; values?: unknown[] }, unknown[] | undefined];
    if (typeof config === 'string') statements.push({ text: config, values: values ?? [] });
    else statements.push({ ...(config.name ? { name: config.name } : {}), text: config.text, values: config.values ?? [] });
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  try {
    let fewest: { statements: RecordedStatement[]; body: unknown } | undefined;
    for (let attempt = 0; attempt < 10; attempt += 1) {
      statements = [];
      const response = await fetch(url, { headers });
      if (!response.ok) throw new Error(`GET ${url}: ${response.status}`);
      const body: unknown = await response.json();
      if (!fewest || statements.length < fewest.statements.length) fewest = { statements, body };
    }
    return fewest!;
  } finally {
    pg.Client.prototype.query = query;
  }
}

/** What the reads read, made through the API as a user would (the card and the send's funds through the service's code). */
async function readFixtures(url: string, secret: string, orm: Orm): Promise<{ walletId: string; cardId: string; transactionId: string; invoiceId: string }> {
  const call = callerFor(url, secret);
  const vault = await call('POST', '/v1/vaults', { name: 'Benchmark vault' });
  const wallet = await call('POST', '/v1/wallets', { name: 'Benchmark wallet', chain: 'ethereum', vault_id: vault.id, wallet_type: 'hot' });
  await creditWallet(orm.em.fork(), wallet.id as string, 10n ** 18n);
  // No worker serves the task queue: the send stays where it was accepted, its amount locked.
  const send = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: privateKeyToAccount(generatePrivateKey()).address, amount: '0.0001', asset: 'ETH' });
  await call('POST', '/v1/sandbox/balances', { currency: 'usd', amount: '50000' });
  const card = await call('POST', '/api/cards', BENCH_CARD_BODY);
  const invoice = await call('POST', '/api/lightning/invoices', { amount: 1500, description: 'benchmark', reference: randomUUID() });
  return { walletId: wallet.id as string, cardId: card.data.card.id as string, transactionId: send.id as string, invoiceId: invoice.id as string };
}

runBenchmark(main);
