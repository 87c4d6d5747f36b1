import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { applyBalanceEntry, readBalances } from '../../src/balances/service';
import { CompanyBalanceEntry } from '../../src/balances/entities';
import { Event } from '../../src/events/entities';
import { createKeyProvider } from '../../src/keys/provider';
import { KeyService } from '../../src/keys/service';
import { LightningInvoice } from '../../src/lightning/entities';
import { issueSandboxInvoice } from '../../src/lightning/sandbox-network';
import { createInvoice, createPayment, invoiceWorkflowId, paymentWorkflowId } from '../../src/lightning/service';
import { createLogger } from '../../src/logger';
import { workflowBundle } from '../../src/temporal/worker';
import { createTestOrganization } from '../support/app';
import { testConfig, testOrm, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { createTestWorker } from '../support/worker';

/** The time-skipping server has no custom search attributes. */
const NO_SEARCH_ATTRIBUTES = { TEMPORAL_SEARCH_ATTRIBUTES: 'false' };

describe('Lightning workflows (time-skipping)', () => {
  let env: TestWorkflowEnvironment;
  const keys = new KeyService(createKeyProvider(testConfig(), createLogger('silent')));

  before(async () => {
    env = await timeSkippingTemporal();
  });

  const temporalFor = (taskQueue: string) => ({ client: env.client, config: testConfig({ TEMPORAL_TASK_QUEUE: taskQueue, ...NO_SEARCH_ATTRIBUTES }) });
  const load = async (id: string) => (await testOrm()).em.fork().findOneOrFail(LightningInvoice, { id });

  async function fund(organizationId: string, sats: bigint) {
    await (await testOrm()).em.fork().transactional((tx) =>
      applyBalanceEntry(tx, { organizationId, currency: 'sat', kind: 'credit', amount: sats, reference: { type: 'sandbox_credit', id: randomUUID() } }),
    );
  }

  async function startPayment(taskQueue: string, organizationId: string, node: 'ok' | 'unknown' | 'unknown_then_fail', amountSat: number) {
    const { request } = issueSandboxInvoice({ node, amountSat, description: `sandbox ${node}`, expirySeconds: 3600, now: new Date() });
    const payment = await (await testOrm()).em
      .fork()
      .transactional((tx) => createPayment(tx, temporalFor(taskQueue), { organizationId, environment: 'sandbox' }, { request, reference: randomUUID() }));
    return { payment, handle: env.client.workflow.getHandle(paymentWorkflowId(payment.id)) };
  }

  async function ledger(organizationId: string, paymentId: string) {
    const em = (await testOrm()).em.fork();
    const entries = await em.find(CompanyBalanceEntry, { organization: organizationId, referenceId: paymentId }, { orderBy: { createdAt: 'asc' } });
    const events = await em.find(Event, { organization: organizationId, type: { $like: 'lightning.payment.%' } });
    const sat = (await readBalances(em, organizationId)).find((balance) => balance.currency === 'sat')!;
    return { entries: entries.map((entry) => `${entry.kind} ${entry.amount}`), events: events.map((event) => event.type), sat };
  }

  it('expires an unpaid invoice exactly at its expiry time, once', async () => {
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES);
    const org = await createTestOrganization();
    const issuedAt = new Date(await env.currentTimeMs());
    const invoice = await (await testOrm()).em
      .fork()
      .transactional((tx) =>
        createInvoice(tx, keys, temporalFor(taskQueue), { organizationId: org.organizationId, environment: 'sandbox' }, { amountSat: 10, description: 'expiring', expirySeconds: 3600, reference: randomUUID(), issuedAt }),
      );
    const handle = env.client.workflow.getHandle(invoiceWorkflowId(invoice.id));
    await worker.runUntil(async () => {
      await env.sleep(invoice.expiresAt.getTime() - (await env.currentTimeMs()) - 1_000);
      assert.equal((await load(invoice.id)).status, 'pending', 'one second before expiry');
      assert.equal(await handle.result(), 'expired');
    });
    const expired = await load(invoice.id);
    assert.equal(expired.status, 'expired');
    assert.equal(expired.updatedAt?.getTime(), invoice.expiresAt.getTime());
    const events = await (await testOrm()).em.fork().find(Event, { organization: org.organizationId, type: 'lightning.invoice.expired' });
    assert.equal(events.length, 1);
    await recordHistoryIfAsked(handle, 'lightning-invoice');
  });

  it('an unknown outcome stays pending and is re-queried until it settles; nothing is refunded blind', async () => {
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES);
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const { payment, handle } = await startPayment(taskQueue, org.organizationId, 'unknown', 4_000);
    await worker.runUntil(async () => {
      assert.equal(await handle.result(), 'paid');
    });
    const history = await handle.fetchHistory();
    const queries = history.events!.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'queryLightningPayment');
    assert.equal(queries.length, 2, 'unknown after the send and the first re-query, paid on the second');
    const { entries, events, sat } = await ledger(org.organizationId, payment.id);
    // Reserve amount + estimated fee (1 + 4 sats), capture amount + actual fee; nothing left to release.
    assert.deepEqual(entries, ['reserve 4005', 'capture 4005']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    assert.deepEqual(sat, { currency: 'sat', available: 5_995n, reserved: 0n });
    await recordHistoryIfAsked(handle, 'lightning-payment');
  });

  it('an unknown outcome that turns out failed releases the reserve only then', async () => {
    const { worker, taskQueue } = await createTestWorker(env, undefined, NO_SEARCH_ATTRIBUTES);
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const { payment, handle } = await startPayment(taskQueue, org.organizationId, 'unknown_then_fail', 1_000);
    await worker.runUntil(async () => {
      assert.equal(await handle.result(), 'failed');
    });
    const { entries, events, sat } = await ledger(org.organizationId, payment.id);
    assert.deepEqual(entries, ['reserve 1002', 'release 1002']);
    assert.deepEqual(events, ['lightning.payment.failed']);
    assert.deepEqual(sat, { currency: 'sat', available: 10_000n, reserved: 0n });
    assert.equal((await load(payment.id)).failureReason, 'incorrect_or_unknown_payment_details');
  });

  it('a worker stopped mid-payment: another worker completes it, and money moves once', async () => {
    const taskQueue = `lightning-kill-${randomUUID()}`;
    const org = await createTestOrganization();
    await fund(org.organizationId, 10_000n);
    const first = await createTestWorker(env, taskQueue, NO_SEARCH_ATTRIBUTES, 0);
    const { payment, handle } = await startPayment(taskQueue, org.organizationId, 'unknown', 2_000);
    // The first worker sends the payment and is stopped while the workflow waits to re-query.
    await first.worker.runUntil(async () => {
      for (let i = 0; i < 400 && !(await load(payment.id)).sentAt; i += 1) await new Promise((resolve) => setTimeout(resolve, 25));
    });
    assert.ok((await load(payment.id)).sentAt, 'sent by the first worker');
    assert.equal((await load(payment.id)).status, 'pending');

    const second = await createTestWorker(env, taskQueue, NO_SEARCH_ATTRIBUTES, 0);
    await second.worker.runUntil(async () => {
      assert.equal(await handle.result(), 'paid');
    });
    const history = await handle.fetchHistory();
    const sends = history.events!.filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'sendLightningPayment');
    assert.equal(sends.length, 1, 'sent once');
    const { entries, events, sat } = await ledger(org.organizationId, payment.id);
    assert.deepEqual(entries, ['reserve 2003', 'capture 2003']);
    assert.deepEqual(events, ['lightning.payment.succeeded']);
    assert.deepEqual(sat, { currency: 'sat', available: 7_997n, reserved: 0n });
  });

  it('replays the recorded invoice and payment histories with the current workflow code', async () => {
    const bundle = await workflowBundle();
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('lightning-invoice'), 'lightning-invoice');
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('lightning-payment'), 'lightning-payment');
  });
});
