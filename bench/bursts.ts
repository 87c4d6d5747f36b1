import { randomUUID } from 'node:crypto';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { loadConfig, type Config } from '../src/config';
import { createOrm, migrate, type Orm } from '../src/db/orm';
import { createApp } from '../src/http/app';
import { IdempotencyService } from '../src/idempotency/service';
import { routeModules } from '../src/modules';
import { createAppDeps } from '../src/runtime';
import { temporalConnectionOptions } from '../src/temporal/client';
import { ensureSearchAttributes } from '../src/temporal/setup';
import { createWorker } from '../src/worker-setup';
import { authorizationBurst, burstFigures, burstOrganizations, fire, httpRequester, outcomeOf, readBurst, sendBurst, type BurstOrganization, type BurstRequest } from '../test/support/bursts';
import { alternate, BENCH_ROUNDS, listen, report, runBenchmark, serviceLogger, urlOf } from './support';

/**
 * The bursts of issue 53 (item 5) against the service in this process, on DATABASE_POOL_MAX connections (as
 * `npm start` has it; `DATABASE_POOL_MAX=2 npm run bench bursts` for the suite's pool of two): 200 concurrent sends
 * across 20 wallets of 10 organizations (some under a velocity rule that blocks most, some funded too thinly),
 * 500 concurrent reads (a key, balances, a send, a card, an invoice), 100 concurrent card authorizations. Each
 * round fires the three in turn and reports each one's throughput (requests over the burst's wall time) and p99,
 * and how its answers came out; the ratio of each is the share answered done or refused with the contract's code
 * (goal 1: no 5xx). The fixtures are made once, through the same service with a worker provisioning the cards;
 * the bursts then hit it with no worker on its task queue (accepted sends wait there, their amounts locked), so
 * later rounds find the velocity rules and card balances spent: more refusals, the same paths.
 */
async function main() {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const settings = { ...process.env, RATE_LIMIT_BURST: '1000000000', RATE_LIMIT_PER_SECOND: '1000000000' };
  const setupConfig = loadConfig({ ...settings, TEMPORAL_TASK_QUEUE: `bench-bursts-setup-${randomUUID()}` });
  const orm = await createOrm(setupConfig.DATABASE_URL, setupConfig.DATABASE_POOL_MAX);
  await migrate(orm);
  const orgs = await fixtures(setupConfig, orm);

  // The measured service: a task queue no worker serves.
  const config = loadConfig({ ...settings, TEMPORAL_TASK_QUEUE: `bench-bursts-${randomUUID()}` });
  const service = await listen(createApp(createAppDeps(config, orm, serviceLogger(config.LOG_LEVEL)), routeModules).app);
  const request = httpRequester(urlOf(service));
  const outside = privateKeyToAccount(generatePrivateKey()).address;
  const sentIds = new Map<string, string[]>();

  const measure = (target: string, requests: () => BurstRequest[]) => ({
    target,
    measure: async () => {
      const burst = await fire(request, requests());
      if (target === 'sends') {
        for (const answer of burst.answers) {
          if (answer.status === 201) sentIds.set(answer.request.org.organizationId, [...(sentIds.get(answer.request.org.organizationId) ?? []), answer.body.id]);
        }
      }
      const outcomes = burst.answers.map(outcomeOf);
      return {
        target,
        pool: config.DATABASE_POOL_MAX,
        ...burstFigures(burst),
        done: outcomes.filter((outcome) => outcome === 'done').length,
        refused: outcomes.filter((outcome) => outcome.startsWith('refused')).length,
        failed: outcomes.filter((outcome) => outcome.startsWith('failed')).length,
      };
    },
  });
  const rows = await alternate([
    measure('sends', () => sendBurst(orgs, 200, outside)),
    measure('reads', () => readBurst(orgs, 500, sentIds)),
    measure('card authorizations', () => authorizationBurst(orgs, 100)),
  ]);
  const ratios = ['sends', 'reads', 'card authorizations'].map((target) => {
    const mine = rows.filter((row) => row.target === target);
    const answered = mine.reduce((sum, row) => sum + row.requests, 0);
    const failed = mine.reduce((sum, row) => sum + row.failed, 0);
    return { name: `${target}: share answered done or refused with a reason (${BENCH_ROUNDS} bursts)`, value: (answered - failed) / answered, goal: 1 };
  });
  await report('bursts', rows, ratios, { pool: config.DATABASE_POOL_MAX });
  service.close();
  await orm.close();
}

/** The organizations, made through the service with the service's worker provisioning their cards, which stops then. */
async function fixtures(config: Config, orm: Orm): Promise<BurstOrganization[]> {
  const log = serviceLogger(config.LOG_LEVEL);
  const deps = createAppDeps(config, orm, log);
  if (config.TEMPORAL_SEARCH_ATTRIBUTES) await ensureSearchAttributes(deps.temporal.connection, config.TEMPORAL_NAMESPACE);
  const service = await listen(createApp(deps, routeModules).app);
  const connection = await NativeConnection.connect(temporalConnectionOptions(config));
  const workers = await createWorker({ connection, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, deps: { config, orm, log, idempotency: new IdempotencyService(config.IDEMPOTENCY_LOCK_SECONDS) } });
  const running = workers.run();
  try {
    return await burstOrganizations(httpRequester(urlOf(service)), () => orm.em.fork(), { organizations: 10, walletsPerOrganization: 2, withCards: true });
  } finally {
    workers.shutdown();
    await running;
    await connection.close();
    service.close();
  }
}

runBenchmark(main);
