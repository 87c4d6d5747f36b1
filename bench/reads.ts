import Koa from 'koa';
import Router from '@koa/router';
import { Pool } from 'pg';
import { createApiKey, hashSecret, presentApiKey } from '../src/api-keys/service';
import { loadConfig } from '../src/config';
import { createOrm, migrate } from '../src/db/orm';
import { createApp } from '../src/http/app';
import { routeModules } from '../src/modules';
import { CreateCardBody } from '../src/cards/schemas';
import { createCard } from '../src/cards/service';
import { keyProviderFor } from '../src/keys/provider';
import { createOrganization } from '../src/organizations/service';
import { createAppDeps } from '../src/runtime';
import { alternate, BENCH_CARD_BODY, listen, measureHttp, medianOf, report, runBenchmark, serviceLogger, urlOf } from './support';

/**
 * Authenticated single-resource reads against the bare ceiling: a Koa + pg route doing the same
 * single-row read of an API key by its hash, in the same process, on the same database. The
 * service runs with rate limits lifted and its logging as `npm start` has it, so the ratio is the
 * price of our whole read path. Rounds alternate the ceiling with every target; ratios are of medians.
 */
async function main() {
  const config = loadConfig({ ...process.env, RATE_LIMIT_BURST: '1000000000', RATE_LIMIT_PER_SECOND: '1000000000' });
  const orm = await createOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  await migrate(orm);
  const em = orm.em.fork();
  const organization = createOrganization(em, 'Benchmark');
  const { key, secret } = createApiKey(em, { organization, name: 'Benchmark', scopes: ['*'], environment: 'sandbox' });
  await em.flush();

  const deps = createAppDeps(config, orm, serviceLogger(config.LOG_LEVEL));
  const service = await listen(createApp(deps, routeModules).app);

  // The ceiling: one pooled connection per request reads the key row by its hash and answers it as JSON.
  const pool = new Pool({ connectionString: config.DATABASE_URL, max: config.DATABASE_POOL_MAX });
  const bare = new Koa();
  const router = new Router();
  const secretHash = hashSecret(secret);
  router.get('/v1/api-keys/me', async (ctx) => {
    const { rows } = await pool.query('select id, name, scopes, environment, api_version, created_at from api_keys where secret_hash = $1', [secretHash]);
    ctx.body = rows[0];
  });
  bare.use(router.routes());
  const baseline = await listen(bare);

  const headers = { authorization: `Bearer ${secret}` };
  const { walletId } = await readFixtures(urlOf(service), headers);
  const card = await deps.orm.em.fork().transactional((tx) =>
    createCard(tx, { organizationId: organization.id, environment: 'sandbox', apiVersion: key.apiVersion }, CreateCardBody.parse(BENCH_CARD_BODY), { feeBps: 0, allowInsecureLoopback: true, keys: keyProviderFor(config), liveIssuer: false }),
  );
  const serverCpu = true;
  const CEILING = 'bare Koa + pg read (baseline)';
  const reads = [
    { target: 'GET /v1/api-keys/me', url: `${urlOf(service)}/v1/api-keys/me` },
    { target: 'GET /v1/wallets/:id/balances', url: `${urlOf(service)}/v1/wallets/${walletId}/balances` },
    { target: 'GET /api/cards/:cardId', url: `${urlOf(service)}/api/cards/${card.card.id}` },
  ];
  const targets = [
    { target: CEILING, measure: () => measureHttp(CEILING, `${urlOf(baseline)}/v1/api-keys/me`, { serverCpu }) },
    ...reads.map(({ target, url }) => ({ target, measure: () => measureHttp(target, url, { headers, serverCpu }) })),
    { target: 'GET /healthz (middleware, no database)', measure: () => measureHttp('GET /healthz (middleware, no database)', `${urlOf(service)}/healthz`, { serverCpu }) },
    {
      target: 'GET /v1/chains/bitcoin (authenticated, no read)',
      measure: () => measureHttp('GET /v1/chains/bitcoin (authenticated, no read)', `${urlOf(service)}/v1/chains/bitcoin`, { headers, serverCpu }),
    },
  ];
  const rows = await alternate(targets);
  const ceiling = medianOf(rows, CEILING, 'requests_per_second');
  const ceilingCpu = medianOf(rows, CEILING, 'server_cpu_us_per_request');
  // Throughput is the goal; CPU per request says the same with far less noise on a shared machine.
  const ratios = [
    ...reads.map(({ target }) => ({ name: `${target} / bare read (medians)`, value: medianOf(rows, target, 'requests_per_second') / ceiling, goal: 0.6 })),
    ...reads.map(({ target }) => ({ name: `bare read CPU / ${target} CPU, per request (medians)`, value: ceilingCpu / medianOf(rows, target, 'server_cpu_us_per_request') })),
  ];
  await report('reads', rows, ratios, { sample_key: presentApiKey(key).id });

  service.close();
  await deps.keyCache.stop();
  baseline.close();
  await pool.end();
  await deps.temporal.connection.close();
  await orm.close();
}


/** A vault and an Ethereum wallet made through the API, as a user would. */
async function readFixtures(url: string, headers: Record<string, string>): Promise<{ walletId: string }> {
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${url}${path}`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as { id: string };
  };
  const vault = await post('/v1/vaults', { name: 'Benchmark vault' });
  const wallet = await post('/v1/wallets', { name: 'Benchmark wallet', chain: 'ethereum', vault_id: vault.id, wallet_type: 'hot' });
  return { walletId: wallet.id };
}

runBenchmark(main);
