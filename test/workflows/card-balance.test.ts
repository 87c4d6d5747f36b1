import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { Card, CardTransaction } from '../../src/cards/entities';
import { type IssuerProvider, SandboxIssuer } from '../../src/cards/issuer';
import { requestBalanceMove } from '../../src/cards/balance-moves';
import { Event } from '../../src/events/entities';
import { WorkflowStart } from '../../src/temporal/entities';
import { workflowBundle } from '../../src/worker-setup';
import { cardWorker, pendingCard, reconcilePending, sweepStarts, workflowStarts } from '../support/cards';
import { testConfig, testOrm, releaseTimeSkippingTemporal, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { assertLedgerReconciles, companyBalanceEntries } from '../support/ledger';

describe('Card balance workflow (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  after(releaseTimeSkippingTemporal);

  /** An active card with no balance, and a funding of `amount` committed with its start recorded but not fired. */
  async function cardWithUnstartedFunding(amount: number) {
    const { org, card } = await pendingCard(0);
    const { worker, taskQueue } = await cardWorker(env, { maxCachedWorkflows: 0 });
    await worker.runUntil(async () => {
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 1);
      await env.client.workflow.getHandle(`card-provisioning-${card.id}`).result();
    });
    const { transaction } = await (await testOrm()).em
      .fork()
      .transactional((tx) => requestBalanceMove(tx, testConfig({ CARD_FUNDING_FEE_BPS: '100' }), { organizationId: org.organizationId, environment: 'sandbox', apiKeyId: org.apiKeyId, memberId: null }, card.id, { type: 'fund', amount, reference: `ref-${randomUUID()}` }));
    return { org, card, transaction, taskQueue };
  }

  async function assertFundedOnce(organizationId: string, cardId: string, transactionId: string, amount: number, fee: number) {
    const em = (await testOrm()).em.fork();
    assert.equal((await em.findOneOrFail(CardTransaction, { id: transactionId })).status, 'completed');
    assert.equal((await em.findOneOrFail(Card, { id: cardId })).balance, String(amount));
    const entries = await companyBalanceEntries(organizationId, { referenceId: transactionId });
    assert.deepEqual(entries.map((entry) => [entry.kind, entry.amount]).sort(), [
      ['capture', String(amount + fee)],
      ['reserve', String(amount + fee)],
    ]);
    assert.equal(await em.count(Event, { organization: organizationId, type: 'card.transaction.completed' }), 1);
    await assertLedgerReconciles(organizationId);
  }

  it('is started exactly once by the start sweep when the process died after the commit; moves the money once', async () => {
    const { org, card, transaction, taskQueue } = await cardWithUnstartedFunding(2_000);
    const workflowId = `card-balance-${transaction.id}`;
    assert.equal((await workflowStarts(org.organizationId)).get(workflowId)?.startedAt, null);
    const { worker } = await cardWorker(env, { taskQueue });
    const handle = env.client.workflow.getHandle(workflowId);
    await worker.runUntil(async () => {
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 1);
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 0);
      assert.deepEqual(await handle.result(), { status: 'completed' });
    });
    await recordHistoryIfAsked(handle, 'card-balance-local-settlement');
    await assertFundedOnce(org.organizationId, card.id, transaction.id, 2_000, 20);
  });

  it('is restarted by the reconciler when its transaction is pending with no workflow running, and settles once', async () => {
    const { org, card, transaction, taskQueue } = await cardWithUnstartedFunding(3_000);
    const workflowId = `card-balance-${transaction.id}`;
    // The start row says started, but no workflow exists (lost, or terminated by an operator).
    const em = (await testOrm()).em.fork();
    await em.nativeUpdate(WorkflowStart, { workflowId }, { startedAt: new Date() });
    const { worker } = await cardWorker(env, { taskQueue });
    await worker.runUntil(async () => {
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 0);
      const first = await reconcilePending(env.client, taskQueue, org.organizationId);
      assert.deepEqual(first.restarted, [workflowId]);
      assert.deepEqual(await env.client.workflow.getHandle(workflowId).result(), { status: 'completed' });
      const second = await reconcilePending(env.client, taskQueue, org.organizationId);
      assert.deepEqual(second, { checked: 0, restarted: [] });
    });
    assert.equal((await workflowStarts(org.organizationId)).get(workflowId)?.restarts, 1);
    await assertFundedOnce(org.organizationId, card.id, transaction.id, 3_000, 30);
  });

  it('completes a settlement once when the worker is killed in the middle of it', async () => {
    const { org, card, transaction, taskQueue } = await cardWithUnstartedFunding(2_000);
    // Worker 1's issuer call hangs until the worker goes down.
    let reachedIssuer!: () => void;
    const issuerReached = new Promise<void>((resolve) => (reachedIssuer = resolve));
    const hanging: IssuerProvider = {
      name: 'hanging',
      mintCard: (request) => new SandboxIssuer('489537').mintCard(request),
      syncCard: () => new SandboxIssuer('489537').syncCard(),
      async settle() {
        reachedIssuer();
        await Context.current().cancelled;
      },
    };
    const doomed = await cardWorker(env, { taskQueue, issuer: hanging, maxCachedWorkflows: 0 });
    await doomed.worker.runUntil(async () => {
      assert.equal(await sweepStarts(env.client, taskQueue, org.organizationId), 1);
      await issuerReached;
    });
    assert.equal((await (await testOrm()).em.fork().findOneOrFail(CardTransaction, { id: transaction.id })).status, 'pending');

    const second = await cardWorker(env, { taskQueue });
    assert.deepEqual(await second.worker.runUntil(env.client.workflow.getHandle(`card-balance-${transaction.id}`).result()), { status: 'completed' });
    await assertFundedOnce(org.organizationId, card.id, transaction.id, 2_000, 20);
  });

  it('replays the recorded balance histories with the current workflow code', async () => {
    const bundle = await workflowBundle();
    // Recorded when the settlement was an activity, and since it is a local activity.
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('card-balance'), 'card-balance');
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('card-balance-local-settlement'), 'card-balance-local-settlement');
  });
});
