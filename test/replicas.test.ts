import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { CHAIN_IDS } from '../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../src/chains/flows/devnet-blocks';
import type { LightningInvoiceInput } from '../src/lightning/flows/invoice';
import { chainScanWorkflowId } from '../src/monitoring/flows/chain-scan';
import { createTestOrganization, operatorMember, type TestOrganization } from './support/app';
import { validCustomer } from './support/cards';
import { clusterTemporal, testOrm } from './support/environment';
import { eventually } from './support/eventually';
import { assertLedgerReconciles } from './support/ledger';
import { missingTool } from './support/missing-tool';
import { freeLoopbackPort } from './support/ports';
import { terminateWorkflows } from './support/scanning';
import { ServiceProcess } from './support/service-process';
import { temporalServerBuilt } from './support/temporal-cluster';

/**
 * Two API processes and two workers on one PostgreSQL and one Temporal cluster (frontend, two history processes,
 * matching and worker as separate processes on PostgreSQL: scripts/temporal-cluster.sh), started as
 * the compose file starts them: work started through either API is done by either worker, a worker
 * stopped mid-flow loses nothing, and a key revoked through one API is refused by the other at once.
 */
describe('Replicas: two API processes and two workers behave as one service', function () {
  this.timeout(240_000);
  const taskQueue = `replicas-${randomUUID()}`;
  const processes: ServiceProcess[] = [];
  const apis: string[] = [];
  let org: TestOrganization;
  let shared: NodeJS.ProcessEnv;
  const startWorker = (name: string) => {
    const worker = new ServiceProcess(name, 'worker.js', shared);
    processes.push(worker);
    return worker;
  };
  /** `error` with what each process printed last: a worker that died at start-up says why there. */
  const withLogs = (error: Error) => new Error(`${error.message}\n${processes.map((each) => each.log).join('\n')}`);
  /** A worker started and polling the run's queue: its start-up (slow on a loaded machine) is not counted against the work awaited next. */
  const startedWorker = async (name: string) => {
    const worker = startWorker(name);
    await worker.polling((await clusterTemporal()).connection, 'default', taskQueue).catch((error: Error) => {
      throw withLogs(error);
    });
    return worker;
  };

  before(async function () {
    this.timeout(240_000);
    if (!(await temporalServerBuilt())) missingTool(this, 'the Temporal server is not built (scripts/ensure-tools.sh builds it when Go is installed)');
    const env = await clusterTemporal();
    shared = {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: taskQueue,
      DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
      RATE_LIMIT_PER_SECOND: '1000',
      RATE_LIMIT_BURST: '1000',
    };
    for (const name of ['api-a', 'api-b']) {
      const port = await freeLoopbackPort();
      processes.push(new ServiceProcess(name, 'server.js', { ...shared, HOST: '127.0.0.1', PORT: String(port) }));
      apis.push(`http://127.0.0.1:${port}`);
    }
    for (const url of apis) {
      await eventually(async () => ((await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined), `${url} ready`, 60_000, 200).catch((error: Error) => {
        throw withLogs(error);
      });
    }
    org = await createTestOrganization('Replicas');
  });
  after(async () => {
    if (!shared) return;
    const { client } = await clusterTemporal();
    await terminateWorkflows(client, CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]));
    await Promise.all(processes.map((each) => each.stop()));
  });

  async function call(api: number, method: string, route: string, body?: unknown, key = org.secret) {
    const response = await fetch(`${apis[api]}${route}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined, text };
  }

  async function activeCard(api: number) {
    const created = await call(api, 'POST', '/api/cards', { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Ada Lovelace', customer: validCustomer() });
    assert.equal(created.status, 201, created.text);
    const id = created.body.data.card.id as string;
    // Read through the other API: both see one database. A card that never turns active says what each process printed.
    return eventually(async () => ((await call(1 - api, 'GET', `/api/cards/${id}`)).body.data.card.status === 'active' ? id : undefined), 'card active', 60_000).catch((error: Error) => {
      throw withLogs(error);
    });
  }

  /** The processes that completed workflow tasks of `workflowId`, by the pid of their identity (pid@host). */
  async function workersOf(workflowId: string): Promise<Set<number>> {
    const history = await (await clusterTemporal()).client.workflow.getHandle(workflowId).fetchHistory();
    return new Set(
      (history.events ?? []).flatMap((event) => (event.workflowTaskCompletedEventAttributes?.identity ? [Number(event.workflowTaskCompletedEventAttributes.identity.split('@')[0])] : [])),
    );
  }

  /** Whether the process `pid` was handed a workflow task of `workflowId` (its poll answered with it), and whether one of that workflow's tasks then timed out unfinished. */
  async function tasksHandedTo(workflowId: string, pid: number): Promise<{ handed: boolean; timedOut: boolean }> {
    const events = (await (await clusterTemporal()).client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    return {
      handed: events.some((event) => event.workflowTaskStartedEventAttributes?.identity?.split('@')[0] === String(pid)),
      timedOut: events.some((event) => event.workflowTaskTimedOutEventAttributes),
    };
  }

  it('completes a workflow started through either API on whichever worker runs', async () => {
    const first = await startedWorker('worker-1');
    const viaA = await activeCard(0);
    assert.deepEqual([...(await workersOf(`card-provisioning-${viaA}`))], [first.pid]);
    const second = await startedWorker('worker-2');
    await first.stop();
    const viaB = await activeCard(1);
    assert.deepEqual([...(await workersOf(`card-provisioning-${viaB}`))], [second.pid], 'the other worker took it up');
  });

  it('loses nothing when a worker crashes with fundings in flight: each completes once, those it held on the other worker', async () => {
    assert.equal((await call(0, 'POST', '/v1/sandbox/balances', { amount: '100000', currency: 'USD', reference: `replicas-${randomUUID()}` })).status, 200);
    const card = await activeCard(0);
    const running = processes.filter((each) => each.name === 'worker-2')[0]!;
    // Frozen, the worker keeps its polls open. It is the only worker polling, so the server hands those polls the first of
    // the fundings' tasks, which are then in flight on it (with another worker polling, the server may hand it none).
    running.freeze();
    const fundings = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const funded = await call(i % 2, 'POST', `/api/cards/${card}/balance`, { type: 'fund', amount: 100, reference: `replica-fund-${randomUUID()}` });
        assert.equal(funded.status, 200, funded.text);
        return funded.body.data.transaction.id as string;
      }),
    );
    const handedToTheFrozen = async () => (await Promise.all(fundings.map((funding) => tasksHandedTo(`card-balance-${funding}`, running.pid)))).some((each) => each.handed);
    await eventually(async () => ((await handedToTheFrozen()) ? true : undefined), "a funding's task handed to the frozen worker", 30_000).catch((error: Error) => {
      throw withLogs(error);
    });
    const standby = await startedWorker('worker-3');
    // The worker that has been doing the work dies with fundings in flight; the other finishes them.
    await running.kill();
    const settled = await eventually(async () => {
      const listed = (await call(1, 'GET', `/api/cards/${card}/transactions`)).body.data.transactions as { id: string; status: string }[];
      const ours = listed.filter((transaction) => fundings.includes(transaction.id));
      return ours.length === fundings.length && ours.every((transaction) => transaction.status !== 'pending') ? ours : undefined;
    }, 'every funding settled', 90_000);
    assert.deepEqual(
      settled.map((transaction) => transaction.status),
      fundings.map(() => 'completed'),
    );
    const read = await call(0, 'GET', `/api/cards/${card}`);
    assert.equal(String(read.body.data.card.balance_amount), '1000', 'ten fundings of 100 cents, each once');
    await assertLedgerReconciles(org.organizationId);
    for (const funding of fundings) {
      for (const pid of await workersOf(`card-balance-${funding}`)) assert.ok([running.pid, standby.pid].includes(pid), `card-balance-${funding} ran on ${pid}`);
    }
    // In flight on the killed worker: a task it was handed and never finished timed out, and the other worker did the rest.
    const inFlightOnTheKilled = await Promise.all(fundings.map((funding) => tasksHandedTo(`card-balance-${funding}`, running.pid)));
    assert.ok(inFlightOnTheKilled.some((each) => each.handed), 'at least one funding was in flight on the worker when it was killed');
    for (const [index, { handed, timedOut }] of inFlightOnTheKilled.entries()) {
      if (!handed) continue;
      assert.ok(timedOut, `card-balance-${fundings[index]}: the killed worker's task timed out`);
      assert.deepEqual([...(await workersOf(`card-balance-${fundings[index]}`))], [standby.pid], 'finished by the other worker');
    }
  });

  it("a worker killed (SIGKILL) inside a settlement's write: the write rolls back, and another worker settles it once", async () => {
    const doomed = processes.find((each) => each.name === 'worker-3')!;
    const card = await activeCard(0);
    const balanceOf = async () => BigInt((await call(0, 'GET', `/api/cards/${card}`)).body.data.card.balance_amount);
    const before = await balanceOf();
    const orm = await testOrm();
    // Frozen while the funding is asked (its reserve takes the balance row), so that the settlement waits for the row held below.
    doomed.freeze();
    const funded = await call(1, 'POST', `/api/cards/${card}/balance`, { type: 'fund', amount: 250, reference: `killed-in-write-${randomUUID()}` });
    assert.equal(funded.status, 200, funded.text);
    const funding = funded.body.data.transaction.id as string;
    await orm.em.fork().transactional(async (holder) => {
      await holder.execute(`select id from company_balances where organization_id = ? and environment = 'sandbox' and currency = 'usd' for update`, [org.organizationId]);
      doomed.resume();
      // The settlement's transaction waits on the balance row, its card transaction already updated (a row lock it holds).
      const writer = await eventually(
        async () => {
          const [waiting] = await orm.em.getConnection().execute<{ pid: number }[]>(
            `select a.pid from pg_stat_activity a where a.datname = current_database() and a.wait_event_type = 'Lock' and a.query ilike '%from company_balances%for update%' and a.pid <> pg_backend_pid()`,
          );
          return waiting?.pid;
        },
        "the settlement to wait inside its write",
        60_000,
        50,
      );
      const [wrote] = await orm.em.getConnection().execute<{ count: string }[]>(
        `select count(*)::text as count from pg_locks l join pg_class c on c.oid = l.relation where l.pid = ? and c.relname = 'card_transactions' and l.mode = 'RowExclusiveLock'`,
        [writer],
      );
      assert.equal(wrote!.count, '1', 'killed after writing the card transaction, before committing');
      await doomed.kill();
      startWorker('worker-4');
    });
    const settled = await eventually(
      async () => {
        const listed = (await call(1, 'GET', `/api/cards/${card}/transactions`)).body.data.transactions as { id: string; status: string }[];
        return listed.find((transaction) => transaction.id === funding && transaction.status !== 'pending');
      },
      'the funding settled by the other worker',
      90_000,
    );
    assert.equal(settled.status, 'completed');
    assert.equal(await balanceOf(), before + 250n, 'funded once');
    await assertLedgerReconciles(org.organizationId);
  });

  it('a worker restarted after a crash takes up the workflows the dead one held at once, none waiting out its sticky queue', async () => {
    const { client, connection } = await clusterTemporal();
    const crashing = processes.find((each) => each.name === 'worker-4')!;
    const workflowId = `replicas-long-lived-${randomUUID()}`;
    const handle = await client.workflow.start('lightningInvoiceWorkflow', {
      taskQueue,
      workflowId,
      args: [{ invoiceId: randomUUID(), expiresAt: new Date(Date.now() + 24 * 3600 * 1000).toISOString() } satisfies LightningInvoiceInput],
    });
    try {
      // Its first task done on the worker about to crash, which keeps it cached: the server sends its next task to that worker's sticky queue.
      await eventually(async () => ((await workersOf(workflowId)).has(crashing.pid) ? true : undefined), 'the first task on worker-4');
      await crashing.kill();
      const restarted = startWorker('worker-5');
      await restarted.polling(connection, 'default', taskQueue);
      // A signal no workflow handles: one workflow task, nothing changed.
      await handle.signal('replicasWake');
      const after = await eventually(async () => {
        const events = (await handle.fetchHistory()).events ?? [];
        const signalled = events.findIndex((event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'replicasWake');
        const rest = events.slice(signalled + 1);
        return rest.some((event) => event.workflowTaskCompletedEventAttributes) ? rest : undefined;
      }, 'the task after the signal done');
      assert.equal(after.filter((event) => event.workflowTaskTimedOutEventAttributes).length, 0, 'no task waited out the dead worker\'s sticky queue');
      assert.equal(after.find((event) => event.workflowTaskCompletedEventAttributes)!.workflowTaskCompletedEventAttributes!.identity!.split('@')[0], String(restarted.pid));
    } finally {
      await handle.terminate('test over');
    }
  });

  it("shares one key's burst across API processes: N per second is N for the key, not N per process", async () => {
    // Two more API processes with a burst of 6 and a refill too slow to matter during the test.
    const limited: string[] = [];
    for (const name of ['api-c', 'api-d']) {
      const port = await freeLoopbackPort();
      processes.push(new ServiceProcess(name, 'server.js', { ...shared, HOST: '127.0.0.1', PORT: String(port), RATE_LIMIT_BURST: '6', RATE_LIMIT_PER_SECOND: '0.01' }));
      limited.push(`http://127.0.0.1:${port}`);
    }
    for (const url of limited) await eventually(async () => ((await fetch(`${url}/readyz`).catch(() => undefined))?.ok ? true : undefined), `${url} ready`, 60_000, 200);
    const { secret } = (await call(0, 'POST', '/v1/api-keys', { name: 'Bursty', scopes: ['custody:read'] }, (await operatorMember(org.organizationId)).secret)).body as { secret: string };
    const me = (url: string) => fetch(`${url}/v1/api-keys/me`, { headers: { authorization: `Bearer ${secret}` } });
    const remaining: string[] = [];
    for (let i = 0; i < 6; i += 1) {
      const response = await me(limited[i % 2]!);
      assert.equal(response.status, 200);
      remaining.push(response.headers.get('ratelimit-remaining')!);
    }
    assert.deepEqual(remaining, ['5', '4', '3', '2', '1', '0'], 'one bucket, whichever process answers');
    assert.equal((await me(limited[0]!)).status, 429);
    assert.equal((await me(limited[1]!)).status, 429);
  });

  it('refuses a key revoked through one API on the other at once', async () => {
    const created = await call(0, 'POST', '/v1/api-keys', { name: 'Short-lived', scopes: ['custody:read'] }, (await operatorMember(org.organizationId)).secret);
    assert.equal(created.status, 201, created.text);
    const secret = created.body.secret as string;
    assert.equal((await call(0, 'GET', '/v1/api-keys/me', undefined, secret)).status, 200);
    assert.equal((await call(1, 'GET', '/v1/api-keys/me', undefined, secret)).status, 200);
    assert.equal((await call(0, 'DELETE', `/v1/api-keys/${created.body.id}`)).status, 200);
    const revokedAt = Date.now();
    await eventually(async () => ((await call(1, 'GET', '/v1/api-keys/me', undefined, secret)).status === 401 ? true : undefined), 'the other API refuses the key', 5_000, 20);
    assert.ok(Date.now() - revokedAt < 1_000, `refused within a second (${Date.now() - revokedAt} ms)`);
    assert.equal((await call(0, 'GET', '/v1/api-keys/me', undefined, secret)).status, 401);
  });
});
