import { mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import path from 'node:path';
import autocannon from 'autocannon';
import Koa from 'koa';
import Router from '@koa/router';
import { createApiKey, presentApiKey } from '../src/api-keys/service';
import { loadConfig } from '../src/config';
import { createOrm, migrate } from '../src/db/orm';
import { createApp } from '../src/http/app';
import { createLogger } from '../src/logger';
import { routeModules } from '../src/modules';
import { createOrganization } from '../src/organizations/service';
import { createAppDeps } from '../src/runtime';

/**
 * GET /v1/api-keys/me (auth lookup, rate limit, request id, metrics, logging, JSON) against a
 * bare Koa route that returns the same body, in the same run on the same machine: the ratio is
 * the price of the contract layer.
 */
const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);

const listen = (app: Koa): Promise<Server> =>
  new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server));
  });
const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

async function measure(title: string, url: string, headers: Record<string, string>) {
  await autocannon({ url, connections: CONNECTIONS, duration: 2, headers }); // warm-up
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_SECONDS, headers });
  if (result.non2xx || result.errors) throw new Error(`${title}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { title, requests_per_second: result.requests.average, latency_p50_ms: result.latency.p50, latency_p99_ms: result.latency.p99 };
}

async function main() {
  const config = loadConfig({ ...process.env, LOG_LEVEL: 'silent', RATE_LIMIT_BURST: '1000000000', RATE_LIMIT_PER_SECOND: '1000000000' });
  const orm = await createOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  await migrate(orm);
  const em = orm.em.fork();
  const organization = createOrganization(em, 'Benchmark');
  const { key, secret } = createApiKey(em, { organization, name: 'Benchmark', scopes: ['*'], environment: 'sandbox' });
  await em.flush();

  const deps = createAppDeps(config, orm, createLogger('silent'));
  const service = await listen(createApp(deps, routeModules).app);

  const bare = new Koa();
  const router = new Router();
  const body = presentApiKey(key);
  router.get('/v1/api-keys/me', (ctx) => {
    ctx.body = body;
  });
  bare.use(router.routes());
  const baseline = await listen(bare);

  const auth = { authorization: `Bearer ${secret}` };
  const results = [
    await measure('bare Koa route (baseline)', `${urlOf(baseline)}/v1/api-keys/me`, {}),
    await measure('GET /healthz (middleware, no database)', `${urlOf(service)}/healthz`, {}),
    await measure('GET /v1/api-keys/me', `${urlOf(service)}/v1/api-keys/me`, auth),
  ];
  const ratio = results[2]!.requests_per_second / results[0]!.requests_per_second;
  console.table(results);
  console.log(`throughput ratio service/baseline: ${ratio.toFixed(3)} (${CONNECTIONS} connections, ${DURATION_SECONDS} s each)`);

  const out = path.resolve(__dirname, '../../bench/results');
  await mkdir(out, { recursive: true });
  await writeFile(path.join(out, 'api-keys-me.json'), JSON.stringify({ date: new Date().toISOString(), results, ratio }, null, 2));

  service.close();
  baseline.close();
  await deps.temporal.connection.close();
  await orm.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
