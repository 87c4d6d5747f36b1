import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, WorkflowIdReusePolicy } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { applyBalanceEntry, readBalances } from '../../src/balances/service';
import { CompanyBalanceEntry } from '../../src/balances/entities';
import { Card, CardTransaction } from '../../src/cards/entities';
import { type IssuerProvider, SandboxIssuer } from '../../src/cards/issuer';
import { createCard, requestBalanceMove } from '../../src/cards/service';
import { Delivery, Event } from '../../src/events/entities';
import { IdempotencyService } from '../../src/idempotency/service';
import { createLogger } from '../../src/logger';
import { createWorker, workflowBundle } from '../../src/temporal/worker';
import { createTestOrganization } from '../support/app';
import { validCustomer } from '../support/cards';
import { testConfig, testOrm, timeSkippingTemporal } from '../support/environment';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';

/** The time-skipping server has no custom search attributes. */
const NO_SEARCH_ATTRIBUTES = { TEMPORAL_SEARCH_ATTRIBUTES: 'false' };

describe('Card workflows (time-skipping)', () => {
  let env: TestWorkflowEnvironment;

  before(async () => {
    env = await timeSkippingTemporal();
  });

  /** The service's worker on a fresh task queue, optionally with another issuer than the sandbox one. */
  async function cardWorker(options: { taskQueue?: string; issuer?: IssuerProvider; maxCachedWorkflows?: number } = {}) {
    const taskQueue = options.taskQueue ?? `cards-${randomUUID()}`;
    const config = testConfig({ TEMPORAL_TASK_QUEUE: taskQueue, ...NO_SEARCH_ATTRIBUTES });
    const worker = await createWorker({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      maxCachedWorkflows: options.maxCachedWorkflows,
      deps: {
        config,
        orm: await testOrm(),
        log: createLogger('silent'),
        idempotency: new IdempotencyService(config.IDEMPOTENCY_LOCK_SECONDS),
        cardIssuer: options.issuer,
      },
    });
    return { worker, taskQueue };
  }

  /**
   * A funded organization and a pending card (as POST /api/cards leaves it), without webhook_url: a
   * delivery workflow left without a worker would stop the test server from skipping time.
   */
  async function pendingCard(amount: number) {
    const org = await createTestOrganization();
    const em = (await testOrm()).em.fork();
    const { card, initialFunding } = await em.transactional(async (tx) => {
      await applyBalanceEntry(tx, { organizationId: org.organizationId, currency: 'usd', kind: 'credit', amount: 100_000n, reference: { type: 'test', id: randomUUID() } });
      const auth = {
        organizationId: org.organizationId,
        apiKeyId: org.apiKeyId,
        memberId: null,
        scopes: ['*'],
        environment: 'sandbox' as const,
        apiVersion: '2026-05-15',
        lastUsedAt: new Date(),
      };
      const body = { amount, card_type: 'virtual' as const, currency: 'USD' as const, name: 'Ada Lovelace', customer: validCustomer() as never };
      return createCard(tx, auth, body, 100);
    });
    return { org, card, initialFunding };
  }

  const provision = (taskQueue: string, cardId: string) =>
    env.client.workflow.start('cardProvisioningWorkflow', {
      taskQueue,
      workflowId: `card-provisioning-${cardId}`,
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      args: [{ cardId }],
    });

  it('provisions, funds and announces a card once; a second start with the same id is refused', async () => {
    const { org, card, initialFunding } = await pendingCard(5_000);
    const { worker, taskQueue } = await cardWorker();
    const handle = await worker.runUntil(async () => {
      const started = await provision(taskQueue, card.id);
      assert.deepEqual(await started.result(), { status: 'active' });
      await assert.rejects(provision(taskQueue, card.id), WorkflowExecutionAlreadyStartedError);
      return started;
    });
    await recordHistoryIfAsked(handle, 'card-provisioning');

    const em = (await testOrm()).em.fork();
    const provisioned = await em.findOneOrFail(Card, { id: card.id });
    assert.equal(provisioned.status, 'active');
    assert.equal(provisioned.createdStatus, 'completed');
    assert.match(provisioned.maskedPan, /^489537\*{6}\d{4}$/);
    assert.equal(provisioned.balance, '5000');
    const funding = await em.findOneOrFail(CardTransaction, { id: initialFunding!.id });
    assert.equal(funding.status, 'completed');
    assert.equal(funding.feeAmount, '50');
    const [usd] = await readBalances(em, org.organizationId);
    assert.equal(usd!.available, 100_000n - 5_050n);
    assert.equal(usd!.reserved, 0n);
    const ready = await em.findOneOrFail(Event, { organization: org.organizationId, type: 'card.ready' });
    const deliveries = await em.find(Delivery, { event: ready });
    // No endpoint and no webhook_url here: the card destination is covered by the API tests.
    assert.deepEqual(deliveries, []);
    assert.equal((ready.data as { status: string }).status, 'active');
  });

  it('replays the recorded provisioning history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('card-provisioning'), 'card-provisioning');
  });

  it('refuses termination at 23 h 59 min after creation and accepts it at 24 h (workflow time)', async () => {
    const { org, card } = await pendingCard(1_000);
    const { worker, taskQueue } = await cardWorker();
    let createdAt!: Date;
    const terminate = () =>
      env.client.workflow.execute('cardTerminationWorkflow', {
        taskQueue,
        workflowId: `card-termination-${card.id}`,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        args: [{ cardId: card.id, createdAt: createdAt.toISOString(), reason: 'closing' }],
      });
    await worker.runUntil(async () => {
      await (await provision(taskQueue, card.id)).result();
      // Created now on the test server's clock (which has skipped ahead of the wall clock).
      createdAt = new Date(await env.currentTimeMs());
      await (await testOrm()).em.fork().nativeUpdate(Card, { id: card.id }, { createdAt });
      await env.sleep('1439 minutes');
      await assert.rejects(terminate(), (error: unknown) => {
        assert.ok(error instanceof WorkflowFailedError);
        assert.ok(error.cause instanceof ApplicationFailure);
        assert.equal(error.cause.type, 'CardTerminationCoolingPeriod');
        assert.deepEqual(error.cause.details, [{ terminable_at: new Date(createdAt.getTime() + 24 * 3600_000).toISOString() }]);
        return true;
      });
      assert.equal((await (await testOrm()).em.fork().findOneOrFail(Card, { id: card.id })).status, 'active');
      await env.sleep('1 minute');
      const result = await terminate();
      assert.equal(result.status, 'terminated');
      assert.equal(result.remaining_balance, '1000');
      assert.equal(result.balance_returned, true);
      assert.equal(result.reason, 'closing');
    });
    const em = (await testOrm()).em.fork();
    const terminated = await em.findOneOrFail(Card, { id: card.id });
    assert.equal(terminated.status, 'terminated');
    assert.equal(terminated.balance, '0');
    const [usd] = await readBalances(em, org.organizationId);
    assert.equal(usd!.available, 100_000n - 1_010n + 1_000n);
  });

  it('completes a settlement once when the worker is killed in the middle of it', async () => {
    const { org, card } = await pendingCard(0);
    const first = await cardWorker({ maxCachedWorkflows: 0 });
    await first.worker.runUntil(async () => (await provision(first.taskQueue, card.id)).result());
    const em = (await testOrm()).em.fork();
    const { transaction } = await em.transactional((tx) =>
      requestBalanceMove(tx, org.organizationId, card.id, { type: 'fund', amount: 2_000, reference: `ref-${randomUUID()}` }, 100),
    );

    // Worker 1's issuer call hangs until the worker goes down.
    let reachedIssuer!: () => void;
    const issuerReached = new Promise<void>((resolve) => (reachedIssuer = resolve));
    const hanging: IssuerProvider = {
      name: 'hanging',
      mintCard: (request) => new SandboxIssuer('489537').mintCard(request),
      async settle() {
        reachedIssuer();
        await Context.current().cancelled;
      },
    };
    const doomed = await cardWorker({ taskQueue: first.taskQueue, issuer: hanging, maxCachedWorkflows: 0 });
    const settlement = await env.client.workflow.start('cardBalanceWorkflow', {
      taskQueue: first.taskQueue,
      workflowId: `card-balance-${transaction.id}`,
      args: [{ transactionId: transaction.id }],
    });
    await doomed.worker.runUntil(issuerReached);
    assert.equal((await em.fork().findOneOrFail(CardTransaction, { id: transaction.id })).status, 'pending');

    const second = await cardWorker({ taskQueue: first.taskQueue });
    assert.deepEqual(await second.worker.runUntil(settlement.result()), { status: 'completed' });
    const check = em.fork();
    assert.equal((await check.findOneOrFail(CardTransaction, { id: transaction.id })).status, 'completed');
    assert.equal((await check.findOneOrFail(Card, { id: card.id })).balance, '2000');
    const entries = await check.find(CompanyBalanceEntry, { organization: org.organizationId, referenceId: transaction.id });
    assert.deepEqual(entries.map((entry) => [entry.kind, entry.amount]).sort(), [
      ['capture', '2020'],
      ['reserve', '2020'],
    ]);
    assert.equal(await check.count(Event, { organization: org.organizationId, type: 'card.transaction.completed' }), 1);
  });
});
