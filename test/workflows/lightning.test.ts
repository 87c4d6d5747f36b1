import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { applyBalanceEntry } from '../../src/balances/service';
import { Event } from '../../src/events/entities';
import { createKeyProvider } from '../../src/keys/provider';
import { KeyService } from '../../src/keys/service';
import { LightningInvoice } from '../../src/lightning/entities';
import { invoiceWorkflowId } from '../../src/lightning/flows/invoice';
import { paymentWorkflowId } from '../../src/lightning/flows/payment';
import { claimPaymentHash, type PaymentHashClaims } from '../../src/lightning/claims';
import { SandboxNetworkProvider, remoteProvidersOf, NO_LIGHTNING_NODES, type LightningProvider, type RemoteProviders } from '../../src/lightning/provider';
import { issueSandboxInvoice, sandboxPreimageFor, type SandboxNode } from '../../src/lightning/sandbox-network';
import { createInvoice, settleIncomingInvoice } from '../../src/lightning/invoices';
import { createPayment, type NewPayment } from '../../src/lightning/payments';
import { createLogger } from '../../src/logger';
import { WorkflowStart } from '../../src/temporal/entities';
import { WorkflowStarter } from '../../src/temporal/starter';
import { workflowBundle } from '../../src/worker-setup';
import { lightningInvoiceExpirySweepWorkflow, lightningInvoiceWorkflow, pendingWorkReconcilerWorkflow, workflowStartSweepWorkflow } from '../../workflows';
import { QUERIES_PER_RUN } from '../../workflows/lightning-payment';
import { createTestOrganization, type TestOrganization } from '../support/app';
import { testConfig, testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { assertLedgerReconciles, companyBalanceEntries } from '../support/ledger';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const HOUR = 3_600_000;

/** Claims as the worker's activities take them, in the test database: the sandbox network's payees settle once. */
const claims: PaymentHashClaims = async (nodeKey, order) => claimPaymentHash((await testOrm()).em.fork(), nodeKey, order.invoice.paymentHash, order.paymentId);
const sandboxProviders = remoteProvidersOf(NO_LIGHTNING_NODES, claims);

const DAY = 24 * HOUR;
/** Each run's history stays under this many events (QUERIES_PER_RUN re-queries of about 11 events each). */
const EVENTS_PER_RUN_BOUND = 1_200;

/** A remote provider that is unreachable (throws, as a node or network outage does) until `reachable`; counts the calls. */
class OutageProvider implements LightningProvider {
  readonly name = 'sandbox_network' as const;
  reachable = false;
  calls = 0;
  private readonly sandbox = new SandboxNetworkProvider(claims);
  estimate: LightningProvider['estimate'] = (invoice, amountMsat) => this.sandbox.estimate(invoice, amountMsat);
  pay: LightningProvider['pay'] = (order) => this.call(() => this.sandbox.pay(order));
  query: LightningProvider['query'] = (order, queryNumber) => this.call(() => this.sandbox.query(order, queryNumber));
  private async call<T>(work: () => Promise<T>): Promise<T> {
    this.calls += 1;
    if (!this.reachable) throw new Error('connect ECONNREFUSED: the Lightning node is unreachable');
    return work();
  }
}

/** A remote provider whose every answer is unknown until `resolved`, then paid with `feeMsat`. */
class UnknownUntilResolvedProvider implements LightningProvider {
  readonly name = 'sandbox_network' as const;
  resolved = false;
  queries = 0;
  private readonly sandbox = new SandboxNetworkProvider(claims);
  constructor(private readonly feeMsat: bigint) {}
  estimate: LightningProvider['estimate'] = (invoice, amountMsat) => this.sandbox.estimate(invoice, amountMsat);
  pay: LightningProvider['pay'] = async () => ({ state: 'unknown' });
  query: LightningProvider['query'] = async (order) => {
    this.queries += 1;
    return this.resolved ? { state: 'succeeded', preimage: sandboxPreimageFor('ok', order.invoice), feeMsat: this.feeMsat } : { state: 'unknown' };
  };
}

describe('Lightning workflows (time-skipping)', () => {
  let env: TestWorkflowEnvironment;
  const keys = new KeyService(createKeyProvider(testConfig(), createLogger('silent')));

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  /** The service's worker on a fresh task queue, optionally with other remote providers than the sandbox network. */
  async function lightningWorker(options: { taskQueue?: string; providers?: RemoteProviders; maxCachedWorkflows?: number } = {}) {
    return createTestWorker(env, options.taskQueue ?? `lightning-${randomUUID()}`, NO_SEARCH_ATTRIBUTES, options.maxCachedWorkflows, { lightningProviders: options.providers });
  }

  /** Routes sandbox-network invoices to `provider` (the rest as usual). */
  const through =
    (provider: LightningProvider): RemoteProviders =>
    (environment, invoice) =>
      sandboxProviders(environment, invoice) ? provider : null;

  const starterFor = (taskQueue: string) => new WorkflowStarter(env.client, testConfig({ TEMPORAL_TASK_QUEUE: taskQueue, ...NO_SEARCH_ATTRIBUTES }), createLogger('silent'));
  const load = async (id: string) => (await testOrm()).em.fork().findOneOrFail(LightningInvoice, { id });

  async function fund(organizationId: string, sats: bigint) {
    await (await testOrm()).em.fork().transactional((tx) =>
      applyBalanceEntry(tx, { organizationId, environment: 'sandbox', currency: 'sat', kind: 'credit', amount: sats, reference: { type: 'sandbox_credit', id: randomUUID() } }),
    );
  }

  /**
   * Creates a payment as POST /api/lightning/payments does: its start is recorded in the same
   * transaction and fired after commit, unless `fire` is false (the process died in between).
   */
  async function startPayment(taskQueue: string, org: TestOrganization, node: SandboxNode, amountSat: number, options: { fire?: boolean } & Partial<NewPayment> = {}) {
    const { request } = issueSandboxInvoice({ node, amountSat, description: `sandbox ${node}`, expirySeconds: 3600, now: new Date() });
    const em = (await testOrm()).em.fork();
    const payer = { organizationId: org.organizationId, environment: 'sandbox' as const, apiKeyId: org.apiKeyId, memberId: null };
    const input = { request, reference: randomUUID(), maxFeeSat: options.maxFeeSat };
    const payment = options.fire === false
      ? await em.transactional((tx) => createPayment(tx, testConfig(), payer, input))
      : await starterFor(taskQueue).transaction(em, (tx) => createPayment(tx, testConfig(), payer, input));
    return { payment, handle: env.client.workflow.getHandle(paymentWorkflowId(payment.id)) };
  }

  async function ledger(organizationId: string, paymentId: string) {
    const em = (await testOrm()).em.fork();
    const entries = await companyBalanceEntries(organizationId, { referenceId: paymentId });
    const events = await em.find(Event, { organization: organizationId, type: { $like: 'lightning.payment.%' } });
    // One transaction's entries share a timestamp: listed in the order money moves.
    const order = ['reserve', 'capture', 'release'];
    entries.sort((a, b) => order.indexOf(a.kind) - order.indexOf(b.kind));
    return { entries: entries.map((entry) => `${entry.kind} ${entry.amount}`), events: events.map((event) => event.type) };
  }

  const sweep = (taskQueue: string, organizationId: string) =>
    env.client.workflow.execute(workflowStartSweepWorkflow, { taskQueue, workflowId: `sweep-${randomUUID()}`, args: [{ graceSeconds: 0, organizationId }] });

  const tenantOf = (organizationId: string) => ({ organizationId, environment: 'sandbox' as const });
  const expiredEvents = async (organizationId: string) =>
    (await (await testOrm()).em.fork().find(Event, { organization: organizationId, type: 'lightning.invoice.expired' })).map((event) => event.data.id as string);

  it('the expiry sweep expires every pending invoice past its deadline across batches, once; future and paid ones stay', async function () {
    this.timeout(5 * 60_000);
    const { worker, taskQueue } = await lightningWorker();
    const org = await createTestOrganization();
    const issuedAt = new Date(await env.currentTimeMs());
    const issue = (tx: EntityManager, expirySeconds: number) =>
      createInvoice(tx, keys, tenantOf(org.organizationId), { amountSat: 10, description: 'sweep', expirySeconds, reference: randomUUID(), issuedAt });
    const { due, future, paid } = await (await testOrm()).em.fork().transactional(async (tx) => {
      const dueInvoices: LightningInvoice[] = [];
      for (let i = 0; i < 1_200; i += 1) dueInvoices.push(await issue(tx, 60));
      return { due: dueInvoices, future: await issue(tx, 3_600), paid: await issue(tx, 60) };
    });
    const settled = await (await testOrm()).em.fork().transactional((tx) =>
      settleIncomingInvoice(tx, { paymentHash: paid.paymentHash, environment: 'sandbox', amountMsat: 10_000n, paidByPaymentId: null }),
    );
    assert.equal(settled.outcome.state, 'succeeded');
    // A plain client: waiting for a sweep must not skip time (to other workflows' timers) past the deadlines.
    const client = new Client({ connection: env.connection, namespace: env.namespace });
    /** One sweep run; `recordAs` names its replay fixture. */
    const sweepRun = async (recordAs?: string) => {
      const handle = await client.workflow.start(lightningInvoiceExpirySweepWorkflow, { taskQueue, workflowId: `expiry-sweep-${randomUUID()}`, args: [{ batchSize: 500, organizationId: org.organizationId }] });
      const result = await handle.result();
      if (recordAs) await recordHistoryIfAsked(handle, recordAs);
      return result;
    };

    await worker.runUntil(async () => {
      const early = await sweepRun();
      assert.deepEqual([early.expired, early.batches, early.complete], [0, 1, true], 'nothing is due before its deadline');
      await env.sleep(120_000);
      const swept = await sweepRun('lightning-invoice-expiry-sweep');
      assert.deepEqual([swept.expired, swept.batches, swept.complete], [1_200, 3, true]);
      assert.ok(Date.parse(swept.dueBy) >= due[0]!.expiresAt.getTime(), 'the cutoff is workflow time');
      const again = await sweepRun();
      assert.deepEqual([again.expired, again.batches], [0, 1], 'an expired invoice is not expired again');
    });

    const em = (await testOrm()).em.fork();
    const records = await em.find(LightningInvoice, { organization: org.organizationId, direction: 'incoming' });
    const byId = new Map(records.map((record) => [record.id, record]));
    for (const invoice of due) {
      const record = byId.get(invoice.id)!;
      assert.equal(record.status, 'expired');
      assert.equal(record.updatedAt?.getTime(), invoice.expiresAt.getTime(), 'updated_at is the expiry time, as the invoice workflow wrote it');
    }
    assert.equal(byId.get(future.id)!.status, 'pending');
    assert.equal(byId.get(paid.id)!.status, 'paid');
    const events = await expiredEvents(org.organizationId);
    assert.equal(events.length, 1_200, 'one lightning.invoice.expired per invoice');
    assert.deepEqual(new Set(events), new Set(due.map((invoice) => invoice.id)));
    assert.equal(await em.count(WorkflowStart, { workflowId: { $like: 'lightning-invoice-%' }, organizationId: org.organizationId }), 0, 'no workflow per invoice');
  });

  it('an invoice created before the expiry sweep: its workflow still expires it exactly at its expiry time, once', async () => {
    const { worker, taskQueue } = await lightningWorker();
    const org = await createTestOrganization();
    const issuedAt = new Date(await env.currentTimeMs());
    const invoice = await (await testOrm()).em
      .fork()
      .transactional((tx) => createInvoice(tx, keys, tenantOf(org.organizationId), { amountSat: 10, description: 'expiring', expirySeconds: 3600, reference: randomUUID(), issuedAt }));
    // As the recorded start of an invoice created before this change fired it.
    const handle = await env.client.workflow.start(lightningInvoiceWorkflow, {
      taskQueue,
      workflowId: invoiceWorkflowId(invoice.id),
      args: [{ invoiceId: invoice.id, expiresAt: invoice.expiresAt.toISOString() }],
    });
    await worker.runUntil(async () => {
      await env.sleep(invoice.expiresAt.getTime() - (await env.currentTimeMs()) - 1_000);
      assert.equal((await load(invoice.id)).status, 'pending', 'one second before expiry');
      assert.equal(await handle.result(), 'expired');
    });
    const expired = await load(invoice.id);
    assert.equal(expired.status, 'expired');
    assert.equal(expired.updatedAt?.getTime(), invoice.expiresAt.getTime());
    assert.deepEqual(await expiredEvents(org.organizationId), [invoice.id]);
    await recordHistoryIfAsked(handle, 'lightning-invoice');
  });

  it('a payment committed but never started: the start sweep starts it exactly once and it settles once', async () => {
    const { worker, taskQueue } = await lightningWorker();
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const { payment, handle } = await startPayment(taskQueue, org, 'ok', 1_000, { fire: false });
    assert.equal((await load(payment.id)).sentAt, null);
    await worker.runUntil(async () => {
      assert.deepEqual(await sweep(taskQueue, org.organizationId), { started: 1 });
      assert.equal(await handle.result(), 'paid');
      assert.deepEqual(await sweep(taskQueue, org.organizationId), { started: 0 }, 'a fired start is not fired again');
    });
    const { entries, events } = await ledger(org.organizationId, payment.id);
    assert.deepEqual(entries, ['reserve 1002', 'capture 1002']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    await assertLedgerReconciles(org.organizationId);
  });

  it('an unknown outcome stays pending and is re-queried until it settles; nothing is refunded blind', async () => {
    const { worker, taskQueue } = await lightningWorker();
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const { payment, handle } = await startPayment(taskQueue, org, 'unknown', 4_000);
    await worker.runUntil(async () => {
      assert.equal(await handle.result(), 'paid');
    });
    const history = await handle.fetchHistory();
    const queries = history.events!.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'queryLightningPayment');
    assert.equal(queries.length, 2, 'unknown after the send and the first re-query, paid on the second');
    const { entries, events } = await ledger(org.organizationId, payment.id);
    // Reserve amount + estimated fee (1 + 4 sats), capture amount + actual fee; nothing left to release.
    assert.deepEqual(entries, ['reserve 4005', 'capture 4005']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    const balances = await assertLedgerReconciles(org.organizationId);
    assert.deepEqual([balances.usd, balances.sat], [
      { available: 0n, reserved: 0n },
      { available: 5_995n, reserved: 0n },
    ]);
    await recordHistoryIfAsked(handle, 'lightning-payment-send-and-finalize');
  });

  it('an unknown outcome that turns out failed releases the reserve only then', async () => {
    const { worker, taskQueue } = await lightningWorker();
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const { payment, handle } = await startPayment(taskQueue, org, 'unknown_then_fail', 1_000);
    await worker.runUntil(async () => {
      assert.equal(await handle.result(), 'failed');
    });
    const { entries, events } = await ledger(org.organizationId, payment.id);
    assert.deepEqual(entries, ['reserve 1002', 'release 1002']);
    assert.deepEqual(events, ['lightning.payment.failed']);
    assert.deepEqual((await assertLedgerReconciles(org.organizationId)).sat, { available: 10_000n, reserved: 0n });
    assert.equal((await load(payment.id)).failureReason, 'incorrect_or_unknown_payment_details');
  });

  it('a worker stopped mid-payment: another worker completes it, and money moves once', async () => {
    const taskQueue = `lightning-kill-${randomUUID()}`;
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const first = await lightningWorker({ taskQueue, maxCachedWorkflows: 0 });
    const { payment, handle } = await startPayment(taskQueue, org, 'unknown', 2_000);
    // The first worker sends the payment and is stopped while the workflow waits to re-query.
    await first.worker.runUntil(async () => {
      for (let i = 0; i < 400 && !(await load(payment.id)).sentAt; i += 1) await new Promise((resolve) => setTimeout(resolve, 25));
    });
    assert.ok((await load(payment.id)).sentAt, 'sent by the first worker');
    assert.equal((await load(payment.id)).status, 'pending');

    const second = await lightningWorker({ taskQueue, maxCachedWorkflows: 0 });
    await second.worker.runUntil(async () => {
      assert.equal(await handle.result(), 'paid');
    });
    const history = await handle.fetchHistory();
    const sends = history.events!.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'sendAndFinalizeLightningPayment');
    assert.equal(sends.length, 1, 'sent once');
    const { entries, events } = await ledger(org.organizationId, payment.id);
    assert.deepEqual(entries, ['reserve 2003', 'capture 2003']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    assert.deepEqual((await assertLedgerReconciles(org.organizationId)).sat, { available: 7_997n, reserved: 0n });
  });

  it('a provider unreachable for 6 hours: the payment keeps its reserve, then settles once when it is back', async () => {
    const provider = new OutageProvider();
    const { worker, taskQueue } = await lightningWorker({ providers: through(provider) });
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const { payment, handle } = await startPayment(taskQueue, org, 'ok', 1_000);
    await worker.runUntil(async () => {
      await env.sleep(6 * HOUR);
      // Far past the 20 attempts (about 15 minutes) after which it used to give up.
      assert.ok(provider.calls > 60, `retried ${provider.calls} times in 6 hours`);
      const pending = await load(payment.id);
      assert.equal(pending.status, 'pending');
      assert.ok(pending.sentAt, 'the first attempt claimed the send; later ones query');
      assert.ok(pending.heldAt, 'held for an operator (lightning:held) once its attempts ran out, still re-queried');
      assert.deepEqual((await assertLedgerReconciles(org.organizationId)).sat, { available: 8_998n, reserved: 1_002n });
      provider.reachable = true;
      assert.equal(await handle.result(), 'paid');
    });
    assert.equal((await load(payment.id)).heldAt, null, "the node's answer cleared the hold");
    const { entries, events } = await ledger(org.organizationId, payment.id);
    assert.deepEqual(entries, ['reserve 1002', 'capture 1002']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    assert.deepEqual((await assertLedgerReconciles(org.organizationId)).sat, { available: 8_998n, reserved: 0n });
  });

  it('a sent payment whose provider is gone (configuration changed) stays unknown and is re-queried, never failed and refunded', async () => {
    let providerConfigured = false;
    const providers: RemoteProviders = (environment, invoice) => (providerConfigured ? sandboxProviders(environment, invoice) : null);
    const { worker, taskQueue } = await lightningWorker({ providers });
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    // Sent by an earlier run that died before recording the outcome.
    const { payment, handle } = await startPayment(taskQueue, org, 'ok', 1_000, { fire: false });
    await (await testOrm()).em.fork().nativeUpdate(LightningInvoice, { id: payment.id }, { sentAt: new Date() });
    await starterFor(taskQueue).ensureStarted((await testOrm()).em.fork(), paymentWorkflowId(payment.id));
    await worker.runUntil(async () => {
      await env.sleep(HOUR);
      assert.equal((await load(payment.id)).status, 'pending');
      assert.deepEqual((await assertLedgerReconciles(org.organizationId)).sat, { available: 8_998n, reserved: 1_002n });
      providerConfigured = true;
      assert.equal(await handle.result(), 'paid');
    });
    const history = await handle.fetchHistory();
    const sends = history.events!.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'sendAndFinalizeLightningPayment');
    assert.equal(sends.length, 1);
    const { entries, events } = await ledger(org.organizationId, payment.id);
    assert.deepEqual(entries, ['reserve 1002', 'capture 1002']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    await assertLedgerReconciles(org.organizationId);
  });

  // Six days: a day of queries at most 10 min apart, then hourly ones; about 270 queries, so the run continues as new twice.
  it('an unknown outcome re-queried for 6 days continues as new with a bounded history, then settles once', async function () {
    this.timeout(5 * 60_000);
    const provider = new UnknownUntilResolvedProvider(1_000n);
    const { worker, taskQueue } = await lightningWorker({ providers: through(provider) });
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const { payment, handle } = await startPayment(taskQueue, org, 'ok', 1_000);
    const firstRunId = (await handle.describe()).runId;
    await worker.runUntil(async () => {
      await env.sleep(6 * DAY);
      assert.equal((await load(payment.id)).status, 'pending', 'still unknown after 6 days: not refunded');
      provider.resolved = true;
      assert.equal(await handle.result(), 'paid');
    });
    const runs: number[] = [];
    for (let runId: string | undefined = firstRunId; runId; ) {
      const history = await env.client.workflow.getHandle(handle.workflowId, runId).fetchHistory();
      runs.push(history.events!.length);
      runId = history.events!.at(-1)!.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
    }
    assert.ok(runs.length >= 3, `${runs.length} runs`);
    assert.ok(runs.every((events) => events < EVENTS_PER_RUN_BOUND), `events per run: ${runs.join(', ')}`);
    assert.ok(provider.queries >= (runs.length - 1) * QUERIES_PER_RUN);
    const { entries, events } = await ledger(org.organizationId, payment.id);
    // Reserved amount + estimated fee (2 sats); the actual fee was 1 sat, so 1 sat is released.
    assert.deepEqual(entries, ['reserve 1002', 'capture 1001', 'release 1']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    assert.deepEqual((await assertLedgerReconciles(org.organizationId)).sat, { available: 8_999n, reserved: 0n });
  });

  it('the reconciler restarts a pending payment whose workflow is not running, and it settles once', async () => {
    const { worker, taskQueue } = await lightningWorker();
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    // Started, then gone before it settled anything (as if terminated by an operator).
    const { payment, handle } = await startPayment(taskQueue, org, 'ok', 1_000);
    await handle.terminate('lost');
    await worker.runUntil(async () => {
      const result = await env.client.workflow.execute(pendingWorkReconcilerWorkflow, {
        taskQueue,
        workflowId: `reconciler-${randomUUID()}`,
        args: [{ minAgeSeconds: 0, organizationId: org.organizationId }],
      });
      assert.deepEqual(result, { checked: 1, restarted: [paymentWorkflowId(payment.id)] });
      assert.equal(await env.client.workflow.getHandle(paymentWorkflowId(payment.id)).result(), 'paid');
    });
    const start = await (await testOrm()).em.fork().findOneOrFail(WorkflowStart, { workflowId: paymentWorkflowId(payment.id) });
    assert.equal(start.restarts, 1);
    const { entries, events } = await ledger(org.organizationId, payment.id);
    assert.deepEqual(entries, ['reserve 1002', 'capture 1002']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    await assertLedgerReconciles(org.organizationId);
  });

  it('replays the recorded invoice and payment histories with the current workflow code', async () => {
    const bundle = await workflowBundle();
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('lightning-invoice'), 'lightning-invoice');
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('lightning-invoice-expiry-sweep'), 'lightning-invoice-expiry-sweep');
    // Recorded before send and finalize were one activity, and after.
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('lightning-payment'), 'lightning-payment');
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('lightning-payment-send-and-finalize'), 'lightning-payment-send-and-finalize');
  });
});
