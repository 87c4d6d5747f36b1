import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import Long from 'long';
import { IdempotencyRecord } from '../src/idempotency/entities';
import { uuid } from '../src/shared/ids';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config';
import { temporalConnectionOptions } from '../src/temporal/client';
import { SEARCH_ATTRIBUTE_KEYS } from '../src/temporal/search-attributes';
import { ledgerReconciliationScheduleId, ledgerReconciliationWorkflowType } from '../src/monitoring/flows/ledger-reconciliation';
import { ensureSchedules, ensureSearchAttributes, IDEMPOTENCY_RETENTION_SCHEDULE_ID, scheduleDefinitions } from '../src/temporal/setup';
import { localTemporal, testConfig, testOrm } from './support/environment';
import { createTestWorker } from './support/worker';

describe('Temporal wiring on a real dev server', () => {
  it('registers the custom search attributes on a namespace once', async () => {
    const env = await localTemporal();
    const namespace = `ns-${randomUUID().slice(0, 8)}`;
    await env.connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: { seconds: Long.fromNumber(86400) } });
    const added = await ensureSearchAttributes(env.connection, namespace);
    assert.deepEqual(added.sort(), ['OrganizationId', 'ResourceId', 'ResourceType']);
    assert.deepEqual(await ensureSearchAttributes(env.connection, namespace), [], 'idempotent');
    const listed = await env.connection.operatorService.listSearchAttributes({ namespace });
    for (const key of SEARCH_ATTRIBUTE_KEYS) assert.ok(listed.customAttributes?.[key.name] !== undefined, key.name);
  });

  it('registers them once when several workers start at the same moment', async () => {
    const env = await localTemporal();
    const namespace = `ns-${randomUUID().slice(0, 8)}`;
    await env.connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: { seconds: Long.fromNumber(86400) } });
    const results = await Promise.all(Array.from({ length: 4 }, () => ensureSearchAttributes(env.connection, namespace)));
    const listed = await env.connection.operatorService.listSearchAttributes({ namespace });
    for (const key of SEARCH_ATTRIBUTE_KEYS) assert.ok(listed.customAttributes?.[key.name] !== undefined, key.name);
    assert.ok(results.every((added) => added.length === 0 || added.length === SEARCH_ATTRIBUTE_KEYS.length), 'each start either registered them all or found them done');
  });

  it('connects in plain gRPC by default, over TLS with an API key (Temporal Cloud), and with mTLS given a certificate pair', async () => {
    const base = { TEMPORAL_ADDRESS: 'temporal.example:7233', TEMPORAL_API_KEY: undefined, TEMPORAL_TLS: undefined, TEMPORAL_TLS_CERT_PATH: undefined, TEMPORAL_TLS_KEY_PATH: undefined };
    assert.deepEqual(temporalConnectionOptions(base), { address: 'temporal.example:7233' });
    assert.deepEqual(temporalConnectionOptions({ ...base, TEMPORAL_API_KEY: 'cloud-key' }), { address: 'temporal.example:7233', tls: true, apiKey: 'cloud-key' });
    assert.deepEqual(temporalConnectionOptions({ ...base, TEMPORAL_TLS: true }), { address: 'temporal.example:7233', tls: true });
    const dir = await mkdtemp(path.join(tmpdir(), 'mtls-'));
    await writeFile(path.join(dir, 'client.pem'), 'CERT');
    await writeFile(path.join(dir, 'client.key'), 'KEY');
    const mtls = temporalConnectionOptions({ ...base, TEMPORAL_TLS_CERT_PATH: path.join(dir, 'client.pem'), TEMPORAL_TLS_KEY_PATH: path.join(dir, 'client.key') });
    assert.deepEqual(mtls.tls, { clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') } });
    assert.throws(() => loadConfig({ DATABASE_URL: 'postgresql://x', TEMPORAL_TLS_CERT_PATH: '/a.pem' }), /TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH go together/);
  });

  it("gives each worker its configured slots and cache: WORKER_* to the main queue's, WEBHOOK_WORKER_* to the webhooks queue's", async () => {
    const { worker } = await createTestWorker(await localTemporal(), undefined, {
      WORKER_MAX_ACTIVITIES: '7',
      WORKER_MAX_WORKFLOW_TASKS: '5',
      WORKER_CACHED_WORKFLOWS: '33',
      WEBHOOK_WORKER_MAX_ACTIVITIES: '3',
      WEBHOOK_WORKER_MAX_WORKFLOW_TASKS: '2',
      WEBHOOK_WORKER_CACHED_WORKFLOWS: '11',
    });
    const slots = ({ options }: typeof worker.main) => ({
      activities: options.tuner.activityTaskSlotSupplier,
      workflowTasks: options.tuner.workflowTaskSlotSupplier,
      cachedWorkflows: options.maxCachedWorkflows,
    });
    assert.deepEqual(slots(worker.main), {
      activities: { type: 'fixed-size', numSlots: 7 },
      workflowTasks: { type: 'fixed-size', numSlots: 5 },
      cachedWorkflows: 33,
    });
    assert.deepEqual(slots(worker.webhooks), {
      activities: { type: 'fixed-size', numSlots: 3 },
      workflowTasks: { type: 'fixed-size', numSlots: 2 },
      cachedWorkflows: 11,
    });
    await worker.runUntil(async () => undefined);
  });

  it('creates the idempotency retention Schedule, updates it in place, and its runs purge old records', async () => {
    const env = await localTemporal();
    const { worker, taskQueue } = await createTestWorker(env);
    const definitions = scheduleDefinitions(testConfig({ TEMPORAL_TASK_QUEUE: taskQueue }));
    await ensureSchedules(env.client, definitions);
    await ensureSchedules(env.client, definitions); // a restart must not fail or duplicate

    const handle = env.client.schedule.getHandle(IDEMPOTENCY_RETENTION_SCHEDULE_ID);
    const description = await handle.describe();
    assert.equal(description.action.type, 'startWorkflow');
    assert.equal(description.action.workflowType, 'idempotencyRetentionWorkflow');
    assert.equal(description.action.taskQueue, taskQueue);
    assert.equal(description.spec.intervals?.[0]?.every, 60 * 60 * 1000);
    assert.equal(description.policies.overlap, ScheduleOverlapPolicy.SKIP);
    // The ledger reconciliation: one Schedule per chain and environment served (here the sandbox's devnet chains).
    for (const chain of ['bitcoin', 'ethereum', 'tron', 'solana'] as const) {
      const reconciliation = await env.client.schedule.getHandle(ledgerReconciliationScheduleId(chain, 'sandbox')).describe();
      assert.equal(reconciliation.action.type === 'startWorkflow' && reconciliation.action.workflowType, ledgerReconciliationWorkflowType);
      assert.deepEqual(reconciliation.action.type === 'startWorkflow' && reconciliation.action.args, [{ chain, environment: 'sandbox' }]);
      assert.equal(reconciliation.spec.intervals?.[0]?.every, 600_000);
    }

    const em = (await testOrm()).em.fork();
    const stale = em.create(IdempotencyRecord, {
      organizationId: uuid(),
      environment: 'sandbox',
      key: randomUUID(),
      requestHash: 'h',
      method: 'POST',
      path: '/v1/api-keys',
      status: 'completed',
      lockedAt: new Date(Date.now() - 48 * 3600_000),
      createdAt: new Date(Date.now() - 48 * 3600_000),
    });
    await em.flush();

    await worker.runUntil(async () => {
      await handle.trigger();
      let workflowId: string | undefined;
      for (let i = 0; i < 50 && !workflowId; i += 1) {
        workflowId = (await handle.describe()).info.recentActions[0]?.action.workflow.workflowId;
        if (!workflowId) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.ok(workflowId, 'the schedule started a run');
      const result = await env.client.workflow.getHandle(workflowId).result();
      assert.ok(result.purged >= 1);
    });
    assert.equal(await em.fork().count(IdempotencyRecord, { id: stale.id }), 0);
    await handle.delete();
  });
});
