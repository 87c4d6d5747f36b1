import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { ActivityDeps } from '../../activities';
import type { Orm } from '../../src/db/orm';
import { IdempotencyService } from '../../src/idempotency/service';
import { createWorker, type ServiceWorkers } from '../../src/worker-setup';
import { startTestApp, type TestApp } from './app';
import { localTemporal, testConfig, testOrm } from './environment';
import { testLogger } from './secret-scan';

/** Worker config for the time-skipping test server, which has no custom search attributes. */
export const NO_SEARCH_ATTRIBUTES = { TEMPORAL_SEARCH_ATTRIBUTES: 'false' };

/**
 * The service's own workers and activities on a test environment, on a main task queue of its own and
 * the webhooks queue derived from it (both run by `worker.run()`/`runUntil()`, stopped by `shutdown()`).
 */
export async function createTestWorker(
  env: TestWorkflowEnvironment,
  taskQueue = `test-${randomUUID()}`,
  configOverrides: Record<string, string | undefined> = {},
  maxCachedWorkflows?: number,
  /** Test doubles of outside parties: a card issuer, Lightning providers, destination resolvers; chain nodes behind faults; another database than the process's. */
  outsideParties: Partial<Pick<ActivityDeps, 'cardIssuer' | 'lightningProviders' | 'destinationResolvers' | 'chains' | 'orm'>> = {},
): Promise<{ worker: ServiceWorkers; taskQueue: string }> {
  const config = testConfig({ TEMPORAL_TASK_QUEUE: taskQueue, ...configOverrides });
  const worker = await createWorker({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    maxCachedWorkflows,
    deps: { config, orm: await testOrm(), log: testLogger('worker'), idempotency: new IdempotencyService(config.IDEMPOTENCY_LOCK_SECONDS), ...outsideParties },
  });
  return { worker, taskQueue };
}

/**
 * The API and the service's worker on the local dev server, on a task queue of their own (or `config`'s), both
 * with `config` on top, on `orm`'s database (else the process's); `stop` ends both.
 */
export async function startAppWithWorker(config: Record<string, string | undefined> = {}, orm?: Orm): Promise<{ app: TestApp; stop: () => Promise<void> }> {
  const { worker, taskQueue } = await createTestWorker(await localTemporal(), config.TEMPORAL_TASK_QUEUE, config, undefined, orm ? { orm } : {});
  const running = worker.run();
  const app = await startTestApp({ config: { ...config, TEMPORAL_TASK_QUEUE: taskQueue }, orm });
  return {
    app,
    stop: async () => {
      await app.close();
      worker.shutdown();
      await running;
    },
  };
}

/** The service's worker on the local dev server, stopped and started again by tests that restart it mid-flow. */
export class RestartableWorker {
  private worker: ServiceWorkers | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly taskQueue: string,
    private readonly config: Record<string, string>,
  ) {}

  async start(): Promise<void> {
    ({ worker: this.worker } = await createTestWorker(await localTemporal(), this.taskQueue, this.config));
    this.running = this.worker.run();
  }

  async stop(): Promise<void> {
    this.worker?.shutdown();
    await this.running;
    this.worker = undefined;
  }
}
