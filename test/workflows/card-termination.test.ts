import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { readBalances } from '../../src/balances/service';
import { Card } from '../../src/cards/entities';
import { requestTermination } from '../../src/cards/service';
import { workflowBundle } from '../../src/worker-setup';
import { eventually } from '../support/eventually';
import { cardWorker, pendingCard, sweepStarts, workflowStarts } from '../support/cards';
import { testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { assertLedgerReconciles, companyBalanceEntries } from '../support/ledger';

const HOUR = 3600_000;


describe('Card termination workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  /** An organization with an active card funded with `amount` (its provisioning fired by the sweep). */
  async function activeCard(amount: number) {
    const { org, card } = await pendingCard(amount);
    const { worker, taskQueue } = await cardWorker(env);
    await worker.runUntil(async () => {
      await sweepStarts(env.client, taskQueue, org.organizationId);
      await env.client.workflow.getHandle(`card-provisioning-${card.id}`).result();
    });
    return { org, card, worker, taskQueue };
  }

  it('started at 23 h 59 min waits on a durable timer and terminates at 24 h, not before', async () => {
    const { org, card, taskQueue } = await activeCard(1_000);
    const em = (await testOrm()).em.fork();
    // Created now on the test server's clock (which has skipped ahead of the wall clock).
    const createdAt = new Date(await env.currentTimeMs());
    await em.nativeUpdate(Card, { id: card.id }, { createdAt, terminationRequestedAt: createdAt, terminationReason: 'closing' });
    const terminableAt = new Date(createdAt.getTime() + 24 * HOUR);
    await env.sleep('1439 minutes');

    const { worker } = await cardWorker(env, { taskQueue });
    const handle = await env.client.workflow.start('cardTerminationWorkflow', {
      taskQueue,
      workflowId: `card-termination-${card.id}`,
      args: [{ cardId: card.id, terminableAt: terminableAt.toISOString() }],
    });
    const result = await worker.runUntil(async () => {
      await eventually(async () => {
        const { events } = await handle.fetchHistory();
        return events?.some((event) => event.timerStartedEventAttributes) ? true : undefined;
      }, 'the cooling-period timer');
      // Still within the cooling period: waiting, not failed, the card untouched.
      assert.equal((await handle.describe()).status.name, 'RUNNING');
      assert.equal((await em.fork().findOneOrFail(Card, { id: card.id })).status, 'active');
      return handle.result();
    });
    await recordHistoryIfAsked(handle, 'card-termination');
    assert.equal(result.status, 'terminated');
    assert.equal(result.remaining_balance, '1000');
    assert.equal(result.balance_returned, true);
    assert.equal(result.reason, 'closing');
    assert.equal(result.workflow_id, `card-termination-${card.id}`);
    const terminatedAt = Date.parse(result.terminated_at);
    assert.ok(terminatedAt >= terminableAt.getTime() && terminatedAt < terminableAt.getTime() + 60_000, result.terminated_at);

    const terminated = await em.fork().findOneOrFail(Card, { id: card.id });
    assert.equal(terminated.status, 'terminated');
    assert.equal(terminated.balance, '0');
    const [usd] = await readBalances(em.fork(), org.organizationId, 'sandbox');
    assert.equal(usd!.available, 100_000n - 1_010n + 1_000n);
    await assertLedgerReconciles(org.organizationId);
  });

  it('is started exactly once by the start sweep when the process died after the commit; returns the balance once', async () => {
    const { org, card, taskQueue } = await activeCard(2_000);
    const em = (await testOrm()).em.fork();
    await em.nativeUpdate(Card, { id: card.id }, { createdAt: new Date(Date.now() - 25 * HOUR) });
    await em.fork().transactional((tx) => requestTermination(tx, { organizationId: org.organizationId, environment: 'sandbox' }, card.id, 'lost'));
    const workflowId = `card-termination-${card.id}`;
    assert.equal((await workflowStarts(org.organizationId)).get(workflowId)?.startedAt, null);
    const { worker } = await cardWorker(env, { taskQueue });
    const result = await worker.runUntil(async () => {
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 1);
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 0);
      return env.client.workflow.getHandle(workflowId).result();
    });
    assert.equal(result.remaining_balance, '2000');
    assert.equal(result.reason, 'lost');
    const entries = await companyBalanceEntries(org.organizationId, { referenceType: 'card_termination' });
    assert.deepEqual(entries.map((entry) => [entry.kind, entry.amount]), [['credit', '2000']]);
    await assertLedgerReconciles(org.organizationId);
  });

  it('replays the recorded termination history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('card-termination'), 'card-termination');
  });
});
