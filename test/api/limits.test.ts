import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ConsolidationRule, ConsolidationRun } from '../../src/consolidation/entities';
import { consolidationRunFlow } from '../../src/consolidation/flows/run';
import { triggerRun } from '../../src/consolidation/runs';
import { cronShortestInterval } from '../../src/consolidation/schedules';
import { createTestOrganization, operatorMember, startTestApp, type TestApp } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { terminateWorkflows } from '../support/scanning';

/** Small caps, so that each is reached in a few requests (docs/limits.md has the defaults). */
const CAPS = {
  MAX_API_KEYS: '3',
  MAX_WEBHOOK_ENDPOINTS: '2',
  MAX_SUBSCRIPTIONS: '2',
  MAX_CONSOLIDATION_RULES: '3',
  MAX_SCHEDULED_CONSOLIDATION_RULES: '2',
  MAX_POLICIES: '2',
  MAX_POLICY_RULES: '3',
};

describe('Bounded growth: per-environment caps and counted consolidation triggers', () => {
  let app: TestApp;
  // No worker polls this queue: runs stay in progress, so triggers keep arriving on them.
  const taskQueue = `limits-${randomUUID()}`;
  const runIds: string[] = [];

  before(async () => {
    app = await startTestApp({ config: { ...CAPS, TEMPORAL_TASK_QUEUE: taskQueue } });
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, runIds.map((runId) => consolidationRunFlow.workflowId({ runId })));
    await app?.close();
  });

  const call = async (key: string, method: string, path: string, body?: unknown) => app.request(method, path, { key, body });

  function expectLimit(response: { status: number; body: any; text: string }, resource: string, limit: number) {
    assert.equal(response.status, 409, response.text);
    assert.equal(response.body.error.type, 'conflict_error');
    assert.equal(response.body.error.code, 'limit_reached');
    assert.deepEqual(response.body.error.details, { resource, limit, current: limit });
    assert.match(response.body.error.message, new RegExp(`most it may \\(MAX_[A-Z_]+=${limit}\\)`));
  }

  /** A tenant: an organization's sandbox and live keys acting for its owner (keys minted through the API act for a member). */
  async function tenant(name: string) {
    const org = await createTestOrganization(name);
    const owner = async (environment: 'sandbox' | 'live') => (await operatorMember(org.organizationId, { name: `Owner ${environment}`, environment })).secret;
    return { sandbox: await owner('sandbox'), live: await owner('live') };
  }

  /**
   * One cap: `create` fills the sandbox environment to `limit` (after `existing` already there), one
   * more is 409; another organization and the live environment still create; removing one frees a
   * slot, taken again at once.
   */
  async function checkCap(options: {
    resource: string;
    limit: number;
    existing?: number;
    create: (key: string, index: number) => Promise<{ status: number; body: any; text: string }>;
    remove: (key: string, id: string) => Promise<{ status: number; text: string }>;
  }) {
    const { sandbox, live } = await tenant(`Cap ${options.resource}`);
    const ids: string[] = [];
    for (let index = options.existing ?? 0; index < options.limit; index += 1) {
      const created = await options.create(sandbox, index);
      assert.equal(created.status, 201, created.text);
      ids.push(created.body.id);
    }
    expectLimit(await options.create(sandbox, options.limit), options.resource, options.limit);

    const other = await tenant(`Other ${options.resource}`);
    assert.equal((await options.create(other.sandbox, 0)).status, 201, 'another organization is unaffected');
    const inLive = await options.create(live, 0);
    assert.equal(inLive.status, 201, `the live environment is unaffected: ${inLive.text}`);

    const removed = await options.remove(sandbox, ids[0]!);
    assert.equal(removed.status, 200, removed.text);
    assert.equal((await options.create(sandbox, options.limit + 1)).status, 201, 'removing one frees a slot');
    expectLimit(await options.create(sandbox, options.limit + 2), options.resource, options.limit);
  }

  it("caps unrevoked API keys per environment of the new key (the root key and the owner's count); revoking one frees a slot", async () => {
    await checkCap({
      resource: 'api_keys',
      limit: 3,
      existing: 2,
      create: (key, index) => call(key, 'POST', '/v1/api-keys', { name: `Key ${index}`, scopes: ['custody:read'] }),
      remove: (key, id) => call(key, 'DELETE', `/v1/api-keys/${id}`),
    });
  });

  it('caps webhook endpoints; deleting one frees a slot; creations racing for the last slot get it once', async () => {
    const url = (key: string) => (key.startsWith('sk_live_') ? 'https://93.184.215.14/hook' : 'http://127.0.0.1:9/hook');
    const create = (key: string, index: number) => call(key, 'POST', '/v1/webhooks', { name: `Endpoint ${index}`, url: url(key) });
    await checkCap({ resource: 'webhook_endpoints', limit: 2, create, remove: (key, id) => call(key, 'DELETE', `/v1/webhooks/${id}`) });

    const racing = await createTestOrganization('Racing endpoints');
    assert.equal((await create(racing.secret, 0)).status, 201);
    const responses = await Promise.all([1, 2, 3, 4].map((index) => create(racing.secret, index)));
    assert.deepEqual(responses.map((response) => response.status).sort(), [201, 409, 409, 409], responses.map((response) => response.text).join('\n'));
  });

  it('caps address subscriptions; deleting one frees a slot', async () => {
    await checkCap({
      resource: 'subscriptions',
      limit: 2,
      create: (key, index) =>
        call(key, 'POST', '/v1/subscriptions', {
          address: '0x52908400098527886E0F7030069857D2E4169EE7',
          chain: 'ethereum',
          webhook_url: key.startsWith('sk_live_') ? 'https://93.184.215.14/hook' : 'http://127.0.0.1:9/hook',
          event_type: 'incoming_token_tx',
          label: `Watch ${index}`,
        }),
      remove: (key, id) => call(key, 'DELETE', `/v1/subscriptions/${id}`),
    });
  });

  it('caps policies that are not archived (archiving frees a slot), and the rules of one policy', async () => {
    const rule = (index: number) => ({ name: `Block above ${index}`, action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than', value: String(100 + index) }] });
    await checkCap({
      resource: 'policies',
      limit: 2,
      create: (key, index) => call(key, 'POST', '/v1/policies', { name: `Policy ${index}`, rules: [rule(0)] }),
      remove: (key, id) => call(key, 'DELETE', `/v1/policies/${id}`),
    });

    const org = await createTestOrganization('Policy rules');
    const policy = await call(org.secret, 'POST', '/v1/policies', { name: 'Many rules', rules: [rule(0), rule(1)] });
    assert.equal(policy.status, 201, policy.text);
    assert.equal((await call(org.secret, 'POST', `/v1/policies/${policy.body.id}/rules`, rule(2))).status, 201);
    expectLimit(await call(org.secret, 'POST', `/v1/policies/${policy.body.id}/rules`, rule(3)), 'policy_rules', 3);
    const tooMany = await call(org.secret, 'POST', '/v1/policies', { name: 'Too many', rules: [0, 1, 2, 3].map(rule) });
    assert.equal(tooMany.status, 400, tooMany.text);
    assert.equal(tooMany.body.error.param, 'rules');
    assert.equal((await call(org.secret, 'DELETE', `/v1/policies/${policy.body.id}/rules/${policy.body.rules[0].id}`)).status, 200);
    assert.equal((await call(org.secret, 'POST', `/v1/policies/${policy.body.id}/rules`, rule(4))).status, 201, 'deleting a rule frees a slot');
  });

  /** A manual rule's body in the key's environment: a vault with an Ethereum wallet, swept into another vault's. */
  async function ruleBody(key: string) {
    const vault = async (name: string) => {
      const id = (await call(key, 'POST', '/v1/vaults', { name })).body.id as string;
      assert.equal((await call(key, 'POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: id })).status, 201);
      return id;
    };
    return { vault_id: await vault('Deposits'), chain: 'ethereum', destination_type: 'vault', destination_vault_id: await vault('Treasury'), gas_source: 'wallet', trigger_type: 'manual' };
  }

  it('caps consolidation rules; deleting one frees a slot', async () => {
    const bodies = new Map<string, Awaited<ReturnType<typeof ruleBody>>>();
    const bodyFor = async (key: string) => {
      if (!bodies.has(key)) bodies.set(key, await ruleBody(key));
      return bodies.get(key)!;
    };
    await checkCap({
      resource: 'consolidation_rules',
      limit: 3,
      create: async (key) => call(key, 'POST', '/v1/consolidation/rules', await bodyFor(key)),
      remove: (key, id) => call(key, 'DELETE', `/v1/consolidation/rules/${id}`),
    });
  });

  it('caps scheduled rules apart from the others, on create and on becoming scheduled; refuses a schedule ticking more often than every 15 minutes', async () => {
    const { sandbox, live } = await tenant('Schedules');
    const base = await ruleBody(sandbox);
    const scheduled = (cron: string) => ({ ...base, trigger_type: 'scheduled', schedule_cron: cron });

    for (const [cron, interval] of [['* * * * *', 1], ['*/5 * * * *', 5], ['*/7 * * * *', 4], ['0,50 23,0 * * *', 10], ['10-20/5 3 * * *', 5]] as const) {
      const refused = await call(sandbox, 'POST', '/v1/consolidation/rules', scheduled(cron));
      assert.equal(refused.status, 400, `${cron}: ${refused.text}`);
      assert.equal(refused.body.error.code, 'schedule_too_frequent');
      assert.equal(refused.body.error.param, 'schedule_cron');
      assert.deepEqual(refused.body.error.details, { min_interval_minutes: 15, interval_minutes: interval }, cron);
    }
    const first = await call(sandbox, 'POST', '/v1/consolidation/rules', scheduled('*/15 * * * *'));
    assert.equal(first.status, 201, first.text);
    assert.equal((await call(sandbox, 'POST', '/v1/consolidation/rules', scheduled('0,45 3 * * *'))).status, 201);
    expectLimit(await call(sandbox, 'POST', '/v1/consolidation/rules', scheduled('0 3 * * *')), 'scheduled_consolidation_rules', 2);

    // A manual rule (the third of three) cannot become scheduled while the schedules are full.
    const manual = await call(sandbox, 'POST', '/v1/consolidation/rules', base);
    assert.equal(manual.status, 201, manual.text);
    expectLimit(await call(sandbox, 'PATCH', `/v1/consolidation/rules/${manual.body.id}`, { trigger_type: 'scheduled', schedule_cron: '0 4 * * *' }), 'scheduled_consolidation_rules', 2);
    assert.equal((await call(sandbox, 'PATCH', `/v1/consolidation/rules/${first.body.id}`, { trigger_type: 'manual' })).status, 200);
    const becomes = await call(sandbox, 'PATCH', `/v1/consolidation/rules/${manual.body.id}`, { trigger_type: 'scheduled', schedule_cron: '0 4 * * *' });
    assert.equal(becomes.status, 200, becomes.text);
    assert.equal((await call(live, 'POST', '/v1/consolidation/rules', { ...(await ruleBody(live)), trigger_type: 'scheduled', schedule_cron: '0 4 * * *' })).status, 201, 'live has its own');

    // A schedule stored before the minimum existed stays changeable (disabling it must work); a new cron is checked.
    await (await testOrm()).em.fork().nativeUpdate(ConsolidationRule, { id: becomes.body.id }, { scheduleCron: '* * * * *' });
    const disabled = await call(sandbox, 'PATCH', `/v1/consolidation/rules/${becomes.body.id}`, { enabled: false });
    assert.equal(disabled.status, 200, disabled.text);
    assert.equal((await call(sandbox, 'PATCH', `/v1/consolidation/rules/${becomes.body.id}`, { schedule_cron: '*/2 * * * *' })).body.error.code, 'schedule_too_frequent');
  });

  it('reads the shortest gap between ticks of a cron expression', () => {
    for (const [cron, minutes] of [
      ['* * * * *', 1],
      ['*/15 * * * *', 15],
      ['0 * * * *', 60],
      ['30 */2 * * *', 60],
      ['0,30 3 * * *', 30],
      ['5/20 * * * *', 20],
      ['0,55 3,4 * * *', 5],
      ['0,55 3,5 * * *', 55],
      ['0 3 * * MON-FRI', 60],
    ] as const) {
      assert.equal(cronShortestInterval(cron), minutes, cron);
    }
  });

  it('counts the triggers arriving during a run on one fixed-size row, keeping the last one', async () => {
    const { sandbox } = await tenant('Many triggers');
    const rule = await call(sandbox, 'POST', '/v1/consolidation/rules', await ruleBody(sandbox));
    assert.equal(rule.status, 201, rule.text);
    const trigger = (index: number) =>
      app.deps.starter.transaction(app.deps.orm.em.fork(), (em) => triggerRun(em, rule.body.id, { source: 'threshold', detail: `deposit-${String(index).padStart(3, '0')}` }));
    const rowSize = async (runId: string) =>
      Number((await app.deps.orm.em.fork().execute<{ size: number }[]>('select pg_column_size(r.*) as size from consolidation_runs r where id = ?', [runId]))[0]!.size);

    const started = await trigger(0);
    assert.ok(started?.started);
    const runId = started.run.id;
    runIds.push(runId);
    await trigger(1);
    const sizeAfterOne = await rowSize(runId);
    for (let index = 2; index <= 60; index += 1) {
      const joined = await trigger(index);
      assert.equal(joined?.started, false);
      assert.equal(joined.run.id, runId);
    }
    assert.equal(await rowSize(runId), sizeAfterOne, 'the row does not grow with the triggers');

    const run = await call(sandbox, 'GET', `/v1/consolidation/runs/${runId}`);
    assert.equal(run.status, 200, run.text);
    assert.equal(run.body.trigger_source, 'threshold');
    assert.equal(run.body.recorded_trigger_count, 60);
    assert.equal(run.body.last_recorded_trigger.source, 'threshold');
    assert.equal(run.body.last_recorded_trigger.detail, 'deposit-060');
    assert.ok(Date.parse(run.body.last_recorded_trigger.at) >= Date.parse(run.body.created_at));
    assert.equal((await app.deps.orm.em.fork().findOneOrFail(ConsolidationRun, { id: runId })).recordedTriggerCount, 60);
  });
});
