import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import type { ActivityDeps } from '../../activities';
import { IdempotencyService } from '../../src/idempotency/service';
import { createWorker } from '../../src/worker-setup';
import { testConfig, testOrm } from './environment';
import { testLogger } from './secret-scan';

/** Worker config for the time-skipping test server, which has no custom search attributes. */
export const NO_SEARCH_ATTRIBUTES = { TEMPORAL_SEARCH_ATTRIBUTES: 'false' };

/** The service's own worker setup and activities on a test environment, on a task queue of its own. */
export async function createTestWorker(
  env: TestWorkflowEnvironment,
  taskQueue = `test-${randomUUID()}`,
  configOverrides: Record<string, string> = {},
  maxCachedWorkflows?: number,
  /** Test doubles of outside parties: a card issuer, Lightning providers, destination resolvers; chain nodes behind faults. */
  outsideParties: Pick<ActivityDeps, 'cardIssuer' | 'lightningProviders' | 'destinationResolvers' | 'chains'> = {},
): Promise<{ worker: Worker; taskQueue: string }> {
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
