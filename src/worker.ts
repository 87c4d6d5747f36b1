import { NativeConnection } from '@temporalio/worker';
import { Client } from '@temporalio/client';
import { LivePriceFeeds } from './catalogue/prices';
import { startupSelfTest } from './cli/doctor';
import { ensureDevnetWorkflows } from './chains/devnet/producers';
import { ensureChainScanners } from './monitoring/scanner';
import { ConfigError, loadConfig } from './config';
import { nameConnections } from './db/application-name';
import { IdempotencyService } from './idempotency/service';
import { createLogger } from './logger';
import { createOrmWaiting } from './runtime';
import { createTemporalClient, temporalConnectionOptions } from './temporal/client';
import { taskQueueOf } from './temporal/flow';
import { WorkflowStarter } from './temporal/starter';
import { ensureSchedules, ensureSearchAttributes, scheduleDefinitions } from './temporal/setup';
import { releaseStickyQueues } from './temporal/sticky-queues';
import { createWorker } from './worker-setup';

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL, 'worker');
  nameConnections('custody-worker');
  const orm = await createOrmWaiting(config.DATABASE_URL, config.DATABASE_POOL_MAX, () => log.warn('waiting for the database: unreachable or starting up'));
  // As the API's (src/server.ts): logged; in production a lasting failure of a live provider stops the start before the worker polls.
  await startupSelfTest(config, log, orm);

  const { connection, client } = createTemporalClient(config);
  if (config.TEMPORAL_SEARCH_ATTRIBUTES) {
    const added = await ensureSearchAttributes(connection, config.TEMPORAL_NAMESPACE);
    if (added.length) log.info({ search_attributes: added }, 'registered search attributes');
  }
  await ensureSchedules(client as Client, scheduleDefinitions(config));
  const starter = new WorkflowStarter(client as Client, config, log);
  await ensureDevnetWorkflows(starter, config);
  await ensureChainScanners(starter, config);

  // The worker's movements (sweeps, refills, refunds) pass the gate too: it reads the live feeds itself.
  const livePrices = new LivePriceFeeds(config, log);
  void livePrices.start();

  const nativeConnection = await NativeConnection.connect(temporalConnectionOptions(config));
  const workers = await createWorker({
    connection: nativeConnection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    deps: { config, orm, log, idempotency: new IdempotencyService(config.IDEMPOTENCY_LOCK_SECONDS) },
  });
  // Before polling: the workflows an earlier (perhaps crashed) worker held resume here at once.
  await releaseStickyQueues(client as Client, [config.TEMPORAL_TASK_QUEUE, taskQueueOf(config.TEMPORAL_TASK_QUEUE, 'webhooks')], log);
  log.info(
    { task_queue: config.TEMPORAL_TASK_QUEUE, webhooks_task_queue: taskQueueOf(config.TEMPORAL_TASK_QUEUE, 'webhooks'), namespace: config.TEMPORAL_NAMESPACE },
    'worker running',
  );
  // Each Worker.run() returns after SIGINT/SIGTERM (the SDK installs the handlers) once its in-flight tasks drain.
  await workers.run();
  livePrices.stop();
  await nativeConnection.close();
  await connection.close();
  await orm.close();
  log.info('worker stopped');
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
