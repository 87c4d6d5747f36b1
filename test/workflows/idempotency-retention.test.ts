import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { IdempotencyRecord } from '../../src/idempotency/entities';
import { uuid } from '../../src/shared/ids';
import { workflowBundle } from '../../src/worker-setup';
import { idempotencyRetentionWorkflow } from '../../workflows';
import { testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { createTestWorker } from '../support/worker';

const HOUR = 60 * 60 * 1000;

describe('Idempotency retention workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  async function insertRecord(organizationId: string, createdAt: Date): Promise<string> {
    const em = (await testOrm()).em.fork();
    const record = em.create(IdempotencyRecord, {
      organizationId,
      environment: 'sandbox',
      key: randomUUID(),
      requestHash: 'h',
      method: 'POST',
      path: '/v1/api-keys',
      status: 'completed',
      responseStatus: 201,
      responseBody: '{}',
      lockedAt: createdAt,
      createdAt,
    });
    await em.flush();
    return record.id;
  }

  async function exists(id: string): Promise<boolean> {
    return (await (await testOrm()).em.fork().count(IdempotencyRecord, { id })) === 1;
  }

  it('purges records older than 24 h and keeps newer ones, then purges those once a day has passed', async () => {
    const organizationId = uuid();
    const now = await env.currentTimeMs();
    const old = await insertRecord(organizationId, new Date(now - 25 * HOUR));
    const fresh = await insertRecord(organizationId, new Date(now - 1 * HOUR));
    const { worker, taskQueue } = await createTestWorker(env);

    await worker.runUntil(async () => {
      const first = await env.client.workflow.start(idempotencyRetentionWorkflow, {
        taskQueue,
        workflowId: `idempotency-retention-${randomUUID()}`,
        args: [{ retentionHours: 24 }],
      });
      const result = await first.result();
      assert.ok(result.purged >= 1);
      assert.equal(await exists(old), false, 'older than 24 h: purged');
      assert.equal(await exists(fresh), true, 'younger than 24 h: kept');
      assert.ok(Math.abs(Date.parse(result.cutoff) - (now - 24 * HOUR)) < HOUR / 2);
      await recordHistoryIfAsked(first, 'idempotency-retention');

      await env.sleep('24 hours');
      const second = await env.client.workflow.execute(idempotencyRetentionWorkflow, {
        taskQueue,
        workflowId: `idempotency-retention-${randomUUID()}`,
        args: [{ retentionHours: 24 }],
      });
      assert.ok(second.purged >= 1);
      assert.equal(await exists(fresh), false, 'a day later it is older than 24 h too');
    });
  });

  it('replays its recorded history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('idempotency-retention'));
  });
});
