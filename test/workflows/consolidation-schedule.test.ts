import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ScheduleNotFoundError, ScheduleOverlapPolicy, type ScheduleHandle } from '@temporalio/client';
import { Worker as SdkWorker } from '@temporalio/worker';
import { workflowBundle, type ServiceWorkers as Worker } from '../../src/worker-setup';
import { ConsolidationRule, ConsolidationRun } from '../../src/consolidation/entities';
import { consolidationRunFlow } from '../../src/consolidation/flows/run';
import { consolidationScheduleFlow, consolidationScheduleId } from '../../src/consolidation/flows/schedule';
import { WorkflowStart } from '../../src/temporal/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, releaseTimeSkippingTemporal, testOrm, timeSkippingTemporal } from '../support/environment';
import { eventually } from '../support/eventually';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { releaseTogether } from '../support/rule-lock';
import { terminateWorkflows } from '../support/scanning';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const HOUR_MS = 60 * 60 * 1000;

/** A rule to schedule: a vault with an Ethereum wallet swept into another vault's. */
async function ruleBody(call: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: any; text: string }>) {
  const vault = async (name: string) => {
    const id = (await call('POST', '/v1/vaults', { name })).body.id as string;
    assert.equal((await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: id })).status, 201);
    return id;
  };
  return { vault_id: await vault('Deposits'), chain: 'ethereum', destination_type: 'vault', destination_vault_id: await vault('Treasury'), gas_source: 'wallet' };
}

/** The rule's runs, and every trigger they saw (their own and the ones counted on them, each named by the last one's source: all one source here). */
async function runsOf(ruleId: string) {
  const runs = await (await testOrm()).em.fork().find(ConsolidationRun, { rule: ruleId }, { orderBy: { createdAt: 'asc' } });
  return { runs, triggers: runs.flatMap((run) => [run.triggerSource, ...Array<string>(run.recordedTriggerCount).fill(run.lastRecordedTrigger?.source ?? '')]) };
}

/**
 * The Temporal Schedule of a scheduled rule, on the local dev server: the time-skipping test server
 * has no Schedules (creating one fails), so the Schedule's spec, its ticks (a backfill over past
 * days fires each scheduled time) and its pause are checked here, and the action workflow alone
 * under time-skipping below.
 */
describe('Consolidation schedules: one Temporal Schedule per scheduled rule (dev server)', () => {
  let app: TestApp;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  const taskQueue = `consolidation-schedule-${randomUUID()}`;
  const config = { TEMPORAL_TASK_QUEUE: taskQueue };
  const ruleIds: string[] = [];

  before(async () => {
    app = await startTestApp({ config });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Consolidation schedules');
  });
  after(async () => {
    const runs = await (await testOrm()).em.fork().find(ConsolidationRun, { rule: { $in: ruleIds } });
    // Runs still going when the file ends are ended here.
    await terminateWorkflows((await localTemporal()).client, runs.map((run) => consolidationRunFlow.workflowId({ runId: run.id })));
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const handleOf = async (ruleId: string): Promise<ScheduleHandle> => (await localTemporal()).client.schedule.getHandle(consolidationScheduleId(ruleId));
  const described = async (ruleId: string, what: string, accept: (description: Awaited<ReturnType<ScheduleHandle['describe']>>) => boolean) =>
    eventually(
      async () => {
        try {
          const description = await (await handleOf(ruleId)).describe();
          return accept(description) ? description : undefined;
        } catch (error) {
          if (error instanceof ScheduleNotFoundError) return undefined;
          throw error;
        }
      },
      what,
    );
  const gone = (ruleId: string, what: string) =>
    eventually(async () => {
      try {
        await (await handleOf(ruleId)).describe();
        return undefined;
      } catch (error) {
        if (error instanceof ScheduleNotFoundError) return true;
        throw error;
      }
    }, what);

  let rule: any;

  it('creates the Schedule after the rule commits: its cron in UTC, the tick workflow as its action', async () => {
    const created = await call('POST', '/v1/consolidation/rules', { ...(await ruleBody(call)), trigger_type: 'scheduled', schedule_cron: '0 3 * * *' });
    assert.equal(created.status, 201, created.text);
    rule = created.body;
    ruleIds.push(rule.id);
    const starts = await (await testOrm()).em.fork().find(WorkflowStart, { resourceId: rule.id });
    assert.equal(starts.length, 1, "the Schedule's sync is recorded in the rule's transaction (the outbox), not called from the request");
    assert.match(starts[0]!.workflowId, new RegExp(`^consolidation-schedule-sync-${rule.id}-`));

    const description = await described(rule.id, 'the Schedule', () => true);
    assert.equal(description.state.paused, false);
    assert.equal(description.spec.timezone, 'UTC');
    assert.equal(description.action.type, 'startWorkflow');
    assert.equal(description.action.workflowType, consolidationScheduleFlow.workflowType);
    assert.equal(description.action.taskQueue, taskQueue);
    assert.deepEqual(description.action.args, [{ ruleId: rule.id, tick: true }]);
    assert.equal(description.policies.overlap, ScheduleOverlapPolicy.SKIP);
    const next = description.info.nextActionTimes;
    assert.ok(next.length > 0);
    for (const at of next) assert.deepEqual([at.getUTCHours(), at.getUTCMinutes(), at.getUTCSeconds()], [3, 0, 0], `${at.toISOString()} is 03:00 UTC`);
  });

  it('its ticks trigger runs at the scheduled times, each a run or recorded on the run in progress', async () => {
    const handle = await handleOf(rule.id);
    // Four days back: the 03:00 UTC times inside the window are the ticks the Schedule owes.
    const end = new Date(Date.now() - 5 * 60 * 1000);
    const start = new Date(end.getTime() - 4 * 24 * HOUR_MS);
    let owed = 0;
    for (let at = Math.ceil(start.getTime() / HOUR_MS) * HOUR_MS; at <= end.getTime(); at += HOUR_MS) if (new Date(at).getUTCHours() === 3) owed += 1;
    assert.ok(owed >= 3);
    await handle.backfill([{ start, end, overlap: ScheduleOverlapPolicy.ALLOW_ALL }]);
    const seen = await eventually(async () => {
      const found = await runsOf(rule.id);
      return found.triggers.length === owed ? found : undefined;
    }, `${owed} scheduled triggers`);
    assert.ok(seen.runs.length >= 1);
    assert.deepEqual(seen.triggers, Array<string>(owed).fill('scheduled'));
  });

  it('follows the rule: a new cron, paused while disabled (a tick then starts nothing), unpaused when enabled again', async () => {
    // The runs found nothing to sweep and finished: the next tick would start a new one.
    await eventually(async () => ((await call('GET', `/v1/consolidation/rules/${rule.id}`)).body.active_run_id === null ? true : undefined), 'the runs finished');
    const runsBefore = (await runsOf(rule.id)).runs.length;

    assert.equal((await call('PATCH', `/v1/consolidation/rules/${rule.id}`, { schedule_cron: '30 */2 * * *' })).status, 200);
    await described(rule.id, 'the new cron', (description) =>
      description.info.nextActionTimes.every((at) => at.getUTCMinutes() === 30 && at.getUTCHours() % 2 === 0),
    );

    assert.equal((await call('PATCH', `/v1/consolidation/rules/${rule.id}`, { enabled: false })).status, 200);
    await described(rule.id, 'the Schedule paused', (description) => description.state.paused);
    // A tick that fires all the same (a pause not yet applied): nothing starts, the Schedule stays paused.
    const { client } = await localTemporal();
    const outcome = await client.workflow.execute(consolidationScheduleFlow.workflowType, {
      taskQueue,
      workflowId: `${consolidationScheduleId(rule.id)}-late-tick`,
      args: [{ ruleId: rule.id, tick: true }],
    });
    assert.equal(outcome, 'synced');
    assert.equal((await runsOf(rule.id)).runs.length, runsBefore, 'no run after disable');
    assert.equal((await (await handleOf(rule.id)).describe()).state.paused, true);

    assert.equal((await call('PATCH', `/v1/consolidation/rules/${rule.id}`, { enabled: true })).status, 200);
    await described(rule.id, 'the Schedule unpaused', (description) => !description.state.paused);
  });

  it('brings a Schedule lost behind its back back with the next sync, and removes it when the rule stops being scheduled or is deleted', async () => {
    await (await handleOf(rule.id)).delete();
    const { client } = await localTemporal();
    assert.equal(await client.workflow.execute(consolidationScheduleFlow.workflowType, { taskQueue, workflowId: `consolidation-schedule-sync-${rule.id}-repair`, args: [{ ruleId: rule.id, change: 'repair' }] }), 'synced');
    await described(rule.id, 'the Schedule back', (description) => !description.state.paused);

    assert.equal((await call('PATCH', `/v1/consolidation/rules/${rule.id}`, { trigger_type: 'manual' })).status, 200);
    await gone(rule.id, 'the Schedule removed with the trigger type');
    const back = await call('PATCH', `/v1/consolidation/rules/${rule.id}`, { trigger_type: 'scheduled', schedule_cron: '*/15 * * * *', enabled: false });
    assert.equal(back.status, 200, back.text);
    await described(rule.id, 'a paused Schedule for the disabled rule', (description) => description.state.paused);
    assert.equal((await call('DELETE', `/v1/consolidation/rules/${rule.id}`)).status, 200);
    await gone(rule.id, 'the Schedule removed with the rule');
  });
});

/** The Schedule's action, a tick, under time-skipping: two ticks at once make a run and a trigger recorded on it. */
describe('consolidationScheduleWorkflow ticks (time-skipping)', () => {
  let app: TestApp;
  let worker: Worker;
  let running: Promise<void>;
  let org: TestOrganization;
  const taskQueue = `consolidation-tick-${randomUUID()}`;
  const config = { ...NO_SEARCH_ATTRIBUTES, TEMPORAL_TASK_QUEUE: taskQueue };

  before(async () => {
    const env = await timeSkippingTemporal();
    app = await startTestApp({ config, temporal: env });
    org = await createTestOrganization('Consolidation ticks');
    ({ worker } = await createTestWorker(env, taskQueue, config));
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await app?.close();
    await releaseTimeSkippingTemporal();
  });

  it('starts a scheduled run, and records a tick during it on that run', async () => {
    const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
    // Made scheduled in the database: a Schedule cannot be created on this server, and the tick needs none.
    const created = await call('POST', '/v1/consolidation/rules', { ...(await ruleBody(call)), trigger_type: 'manual' });
    assert.equal(created.status, 201, created.text);
    await (await testOrm()).em.fork().nativeUpdate(ConsolidationRule, { id: created.body.id }, { triggerType: 'scheduled', scheduleCron: '0 * * * *' });
    const env = await timeSkippingTemporal();
    const tick = (n: number) =>
      env.client.workflow.execute(consolidationScheduleFlow.workflowType, { taskQueue, workflowId: `${consolidationScheduleId(created.body.id)}-${n}`, args: [{ ruleId: created.body.id, tick: true }] });
    const outcomes = await releaseTogether(created.body.id, 2, () => Promise.all([tick(1), tick(2)]));
    assert.deepEqual([...outcomes].sort(), ['recorded', 'started']);
    const { runs, triggers } = await runsOf(created.body.id);
    assert.equal(runs.length, 1);
    assert.deepEqual(triggers, ['scheduled', 'scheduled']);
    assert.equal(runs[0]!.initiatedByUserId, null);
    await recordHistoryIfAsked(env.client.workflow.getHandle(`${consolidationScheduleId(created.body.id)}-1`), 'consolidation-schedule');
  });

  it('replays the recorded tick history with the current workflow code', async () => {
    await SdkWorker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('consolidation-schedule'), 'consolidation-schedule');
  });
});
