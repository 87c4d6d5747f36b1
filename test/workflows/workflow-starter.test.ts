import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import pino from 'pino';
import { httpStatus } from '../../src/http/errors';
import { createLogger } from '../../src/logger';
import { mineBlocksUpdate } from '../../src/chains/flows/devnet-blocks';
import { DomainError } from '../../src/shared/errors';
import { uuid } from '../../src/shared/ids';
import { WorkflowStart } from '../../src/temporal/entities';
import { defineFlow } from '../../src/temporal/flow';
import { pendingWork, reconcilePendingPage, type PendingWorkSource } from '../../src/temporal/reconciler';
import { OrganizationId, ResourceType } from '../../src/temporal/search-attributes';
import { recordStart, WorkflowStarter } from '../../src/temporal/starter';
import { workflowBundle } from '../../src/worker-setup';
import { pendingWorkReconcilerWorkflow, workflowStartSweepWorkflow } from '../../workflows';
import type { WorkflowStartSweepInput } from '../../workflows/workflow-start-sweep';
import { createTestOrganization } from '../support/app';
import { pendingCard, workflowStarts } from '../support/cards';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { createTestWorker } from '../support/worker';

/**
 * The flow these tests record: a real workflow of the bundle (a start sweep scoped to one
 * organization, with a grace no row of that organization passes, so its run changes nothing),
 * one per organization, with the policies of a money flow so the reconciler may start it again.
 */
const organizationSweepFlow = defineFlow<WorkflowStartSweepInput, { started: number }>({
  workflowType: 'workflowStartSweepWorkflow',
  workflowId: (input) => `test-organization-sweep-${input.organizationId}`,
  resource: (input) => ({ type: 'test_organization_sweep', id: input.organizationId! }),
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
const inputFor = (organizationId: string): WorkflowStartSweepInput => ({ graceSeconds: 3600, organizationId });
const workflowIdOf = (organizationId: string) => organizationSweepFlow.workflowId(inputFor(organizationId));

describe('Workflow starter, start sweep and pending-work reconciler (Temporal dev server)', () => {
  let env: TestWorkflowEnvironment;
  let taskQueue: string;
  let starter: WorkflowStarter;

  before(async () => {
    env = await localTemporal();
  });
  beforeEach(() => {
    taskQueue = `test-${randomUUID()}`;
    starter = new WorkflowStarter(env.client, testConfig({ TEMPORAL_TASK_QUEUE: taskQueue }), createLogger('silent'));
  });

  /** Runs a worker on the test's task queue while `work` runs (workflows fired without one wait for the next). */
  async function withWorker<T>(work: Promise<T> | (() => Promise<T>)): Promise<T> {
    const { worker } = await createTestWorker(env, taskQueue);
    return worker.runUntil(work);
  }

  const em = async () => (await testOrm()).em.fork();
  const startRow = async (organizationId: string) => (await em()).findOneOrFail(WorkflowStart, { organizationId });

  /** The workflow's current run, or undefined when Temporal has none with that id. */
  async function describe(workflowId: string) {
    try {
      return await env.client.workflow.getHandle(workflowId).describe();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return undefined;
      throw error;
    }
  }

  /** Records a start in a committed transaction that nobody fires (as if the process died after commit). */
  async function recordCommitted(organizationId: string): Promise<void> {
    await (await em()).transactional(async (tx) => void recordStart(tx, organizationSweepFlow, inputFor(organizationId), organizationId));
  }

  /** Runs a worker until the given workflows have completed. */
  const runToCompletion = (...workflowIds: string[]) => withWorker(() => Promise.all(workflowIds.map((id) => env.client.workflow.getHandle(id).result())));

  it('records nothing and starts nothing when the transaction rolls back', async () => {
    const organizationId = uuid();
    await assert.rejects(
      starter.transaction(await em(), async (tx) => {
        recordStart(tx, organizationSweepFlow, inputFor(organizationId), organizationId);
        await tx.flush();
        throw new Error('the state change failed');
      }),
      /state change failed/,
    );
    assert.equal(await (await em()).count(WorkflowStart, { organizationId }), 0);
    assert.equal(await describe(workflowIdOf(organizationId)), undefined);
  });

  it('fires a start recorded in a committed transaction and marks it started, with the search attributes', async () => {
    const organizationId = uuid();
    await starter.transaction(await em(), async (tx) => void recordStart(tx, organizationSweepFlow, inputFor(organizationId), organizationId));

    const row = await startRow(organizationId);
    assert.ok(row.startedAt, 'started_at set right after commit');
    assert.equal(row.attempts, 0);
    const description = await describe(row.workflowId);
    assert.equal(description?.type, 'workflowStartSweepWorkflow');
    assert.deepEqual(description?.typedSearchAttributes.get(OrganizationId), organizationId);
    assert.deepEqual(description?.typedSearchAttributes.get(ResourceType), 'test_organization_sweep');
    await runToCompletion(row.workflowId);
  });

  it('leaves a start Temporal could not take to the sweep, which starts it exactly once', async () => {
    const organizationId = uuid();
    // No retry interceptors: the failed start must not go on retrying after the test closes the connection.
    const connection = Connection.lazy({ address: '127.0.0.1:1', interceptors: [] });
    const unreachable = new WorkflowStarter(new Client({ connection }), testConfig({ TEMPORAL_TASK_QUEUE: taskQueue }), createLogger('silent'));
    const began = Date.now();
    try {
      await unreachable.transaction(await em(), async (tx) => void recordStart(tx, organizationSweepFlow, inputFor(organizationId), organizationId));
    } finally {
      await connection.close().catch(() => undefined);
    }
    assert.ok(Date.now() - began < 8_000, `the commit answered after ${Date.now() - began} ms: a down Temporal must not hang it`);
    const failed = await startRow(organizationId);
    assert.equal(failed.startedAt, null);
    assert.equal(failed.attempts, 1);
    assert.ok(failed.lastError, 'the error is on the row for operators');
    assert.equal(await describe(failed.workflowId), undefined);

    await withWorker(async () => {
      const sweep = (run: number) =>
        env.client.workflow.start(workflowStartSweepWorkflow, {
          taskQueue,
          workflowId: `test-sweep-${organizationId}-${run}`,
          args: [{ graceSeconds: 0, organizationId }],
        });
      const first = await sweep(1);
      assert.deepEqual(await first.result(), { started: 1 });
      await recordHistoryIfAsked(first, 'workflow-start-sweep');
      const started = await env.client.workflow.getHandle(failed.workflowId).result();
      assert.deepEqual(started, { started: 0 });
      assert.deepEqual(await (await sweep(2)).result(), { started: 0 }, 'a started start is not fired again');
    });
    const swept = await startRow(organizationId);
    assert.ok(swept.startedAt);
    assert.equal(swept.attempts, 0);
    assert.equal(swept.lastError, null);
    assert.equal((await describe(swept.workflowId))?.status.name, 'COMPLETED', 'one run, not started again after it completed');
  });

  it('sweeps only the organization it is scoped to', async () => {
    const [mine, theirs] = [uuid(), uuid()];
    await recordCommitted(mine);
    await recordCommitted(theirs);
    assert.equal(await starter.sweep(await em(), { graceSeconds: 0, organizationId: mine }), 1);
    assert.ok((await startRow(mine)).startedAt);
    assert.equal((await startRow(theirs)).startedAt, null, "another organization's start is left alone");
    assert.equal(await describe(workflowIdOf(theirs)), undefined);

    assert.equal(await starter.sweep(await em(), { graceSeconds: 0, organizationId: theirs }), 1);
    await runToCompletion(workflowIdOf(mine), workflowIdOf(theirs));
  });

  it('restarts, visibly, pending work whose workflow is not running and leaves a running one alone', async () => {
    // Pending work in three states: its workflow ended, its workflow runs, it has no start row at all.
    const [ended, running, unrecorded] = [uuid(), uuid(), uuid()];
    await starter.transaction(await em(), async (tx) => void recordStart(tx, organizationSweepFlow, inputFor(ended), ended));
    await runToCompletion(workflowIdOf(ended));
    // No worker polls while this one is fired, so it stays running until the end of the test.
    await starter.transaction(await em(), async (tx) => void recordStart(tx, organizationSweepFlow, inputFor(running), running));
    const runningRunId = (await describe(workflowIdOf(running)))!.runId;
    const endedRunId = (await describe(workflowIdOf(ended)))!.runId;

    const source: PendingWorkSource = {
      name: 'test organization',
      pending: async () => ({ work: [ended, running, unrecorded].map((organizationId) => pendingWork(organizationSweepFlow, inputFor(organizationId), organizationId)) }),
    };
    const logged: Array<Record<string, unknown>> = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
    const reconcilingStarter = new WorkflowStarter(env.client, testConfig({ TEMPORAL_TASK_QUEUE: taskQueue }), log);
    const result = await reconcilePendingPage(await em(), reconcilingStarter, source, { olderThan: new Date(), limit: 10 });

    assert.equal(result.checked, 3);
    assert.equal(result.next, undefined);
    assert.deepEqual([...result.restarted].sort(), [workflowIdOf(ended), workflowIdOf(unrecorded)].sort());
    for (const organizationId of [ended, unrecorded]) {
      const restarted = await startRow(organizationId);
      assert.equal(restarted.restarts, 1, 'counted on the row');
      assert.ok(restarted.startedAt);
      const rerun = await describe(restarted.workflowId);
      assert.equal(rerun?.status.name, 'RUNNING');
      assert.deepEqual(rerun?.memo, { restarted_by: 'reconciler', restarts: 1 }, 'shown in the Temporal UI');
    }
    assert.notEqual((await describe(workflowIdOf(ended)))?.runId, endedRunId, 'a new run of the ended workflow');
    assert.deepEqual(
      logged.map(({ msg, workflow_id, restarts, reason }) => ({ msg, workflow_id, restarts, reason })),
      [ended, unrecorded].map((organizationId) => ({
        msg: 'reconciler restarted a workflow',
        workflow_id: workflowIdOf(organizationId),
        restarts: 1,
        reason: 'test organization still pending with no running workflow',
      })),
      'and logged',
    );

    assert.equal((await startRow(running)).restarts, 0);
    assert.equal((await describe(workflowIdOf(running)))?.runId, runningRunId, 'the running workflow is left alone');

    await runToCompletion(workflowIdOf(ended), workflowIdOf(running), workflowIdOf(unrecorded));
  });

  it('runs the pending-work reconciler as a workflow, scoped to an organization', async () => {
    const organizationId = uuid();
    const handle = await env.client.workflow.start(pendingWorkReconcilerWorkflow, {
      taskQueue,
      workflowId: `test-reconciler-${randomUUID()}`,
      args: [{ minAgeSeconds: 0, organizationId }],
    });
    assert.deepEqual(await withWorker(() => handle.result()), { checked: 0, restarted: [] });
  });

  it('pages through every pending row, past stuck ones, continuing as new, and restarts every orphan', async () => {
    // Restarted workflows go to a queue no worker polls, so each stays running and is checked once.
    const idleQueue = `test-idle-${randomUUID()}`;
    const org = await createTestOrganization();
    const stuck = [];
    for (let i = 0; i < 3; i += 1) stuck.push((await pendingCard(100, 100, org)).card);
    // The oldest three have their provisioning running (stuck: nobody works on it).
    const idleStarter = new WorkflowStarter(env.client, testConfig({ TEMPORAL_TASK_QUEUE: idleQueue }), createLogger('silent'));
    assert.equal(await idleStarter.sweep(await em(), { graceSeconds: 0, organizationId: org.organizationId }), 3);
    const orphaned = [];
    for (let i = 0; i < 4; i += 1) orphaned.push((await pendingCard(100, 100, org)).card);
    const provisioningId = (card: { id: string }) => `card-provisioning-${card.id}`;

    const { worker } = await createTestWorker(env, taskQueue, { TEMPORAL_TASK_QUEUE: idleQueue });
    const handle = await env.client.workflow.start(pendingWorkReconcilerWorkflow, {
      taskQueue,
      workflowId: `test-reconciler-${randomUUID()}`,
      // Two rows a page, two pages a run: the seven cards and their seven initial fundings take several runs.
      args: [{ minAgeSeconds: 0, organizationId: org.organizationId, pageSize: 2, pagesPerRun: 2 }],
    });
    const result = await worker.runUntil(() => handle.result());

    assert.equal(result.checked, 14, 'each card and its initial funding');
    assert.deepEqual([...result.restarted].sort(), orphaned.map(provisioningId).sort(), 'every orphan, none of the stuck');
    assert.notEqual((await handle.describe()).runId, handle.firstExecutionRunId, 'continued as new');
    const starts = await workflowStarts(org.organizationId);
    for (const card of orphaned) assert.equal(starts.get(provisioningId(card))?.restarts, 1);
    for (const card of stuck) assert.equal(starts.get(provisioningId(card))?.restarts, 0);
    await recordHistoryIfAsked(env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId), 'pending-work-reconciler-pages');
    await Promise.all([...stuck, ...orphaned].map((card) => env.client.workflow.getHandle(provisioningId(card)).terminate('test over')));
  });

  it('answers an update to a workflow that is gone 503 worker_unavailable, retryable, not an internal error', async () => {
    // What an update meets when its workflow closed or continued as new before answering: Temporal's NotFound.
    const refused = await starter.executeUpdate(`test-gone-${randomUUID()}`, mineBlocksUpdate, { count: 1 }).then(
      () => assert.fail('an update to no workflow answered'),
      (error: unknown) => error,
    );
    assert.ok(refused instanceof DomainError, String(refused));
    assert.deepEqual([refused.code, httpStatus(refused), refused.details.retry_after_seconds], ['worker_unavailable', 503, 5]);
    assert.match(refused.message, /did not finish the request/);
  });

  it('replays the recorded histories of the start sweep and the reconciler with the current workflow code', async () => {
    const bundle = await workflowBundle();
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('workflow-start-sweep'));
    // Recorded before the reconciler paged, and a paging run that continued as new.
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('pending-work-reconciler'));
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('pending-work-reconciler-pages'));
  });
});
