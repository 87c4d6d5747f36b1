import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { readBalances } from '../../src/balances/service';
import { Card, CardTransaction } from '../../src/cards/entities';
import { Delivery, Event } from '../../src/events/entities';
import { workflowBundle } from '../../src/worker-setup';
import { cardWorker, pendingCard, sweepStarts, workflowStarts } from '../support/cards';
import { testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { assertLedgerReconciles, companyBalanceEntries } from '../support/ledger';

describe('Card provisioning workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  it('is started exactly once by the start sweep when the process died after the commit; provisions, funds and announces once', async () => {
    const { org, card, initialFunding } = await pendingCard(5_000);
    const workflowId = `card-provisioning-${card.id}`;
    assert.equal((await workflowStarts(org.organizationId)).get(workflowId)?.startedAt, null);
    const { worker, taskQueue } = await cardWorker(env);
    const handle = env.client.workflow.getHandle(workflowId);
    await worker.runUntil(async () => {
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 1);
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 0);
      assert.deepEqual(await handle.result(), { status: 'active' });
    });
    await recordHistoryIfAsked(handle, 'card-provisioning');
    assert.ok((await workflowStarts(org.organizationId)).get(workflowId)?.startedAt);

    const em = (await testOrm()).em.fork();
    const provisioned = await em.findOneOrFail(Card, { id: card.id });
    assert.equal(provisioned.status, 'active');
    assert.equal(provisioned.createdStatus, 'completed');
    assert.match(provisioned.maskedPan, /^489537\*{6}\d{4}$/);
    assert.equal(provisioned.balance, '5000');
    const funding = await em.findOneOrFail(CardTransaction, { id: initialFunding!.id });
    assert.equal(funding.status, 'completed');
    assert.equal(funding.feeAmount, '50');
    const [usd] = await readBalances(em, org.organizationId, 'sandbox');
    assert.equal(usd!.available, 100_000n - 5_050n);
    assert.equal(usd!.reserved, 0n);
    const entries = await companyBalanceEntries(org.organizationId, { referenceId: funding.id });
    assert.deepEqual(entries.map((entry) => [entry.kind, entry.amount]).sort(), [
      ['capture', '5050'],
      ['reserve', '5050'],
    ]);
    const ready = await em.find(Event, { organization: org.organizationId, type: 'card.ready' });
    assert.equal(ready.length, 1);
    // No endpoint and no webhook_url here: the card destination is covered by the API tests.
    assert.deepEqual(await em.find(Delivery, { event: ready[0]! }), []);
    assert.equal((ready[0]!.data as { status: string }).status, 'active');
    await assertLedgerReconciles(org.organizationId);
  });

  it('replays the recorded provisioning history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('card-provisioning'), 'card-provisioning');
  });
});
