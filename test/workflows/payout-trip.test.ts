import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { AuthContext } from '../../src/api-keys/auth-context';
import { readBalances } from '../../src/balances/service';
import type { ChainId } from '../../src/catalogue/service';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { ChainNodes } from '../../src/chains/nodes';
import { TransactionRejectedError, type ChainProvider } from '../../src/chains/provider';
import type { Environment } from '../../src/api-keys/entities';
import { Event } from '../../src/events/entities';
import { scanChain } from '../../src/monitoring/scanner';
import { simulateDeposit } from '../../src/monitoring/sandbox';
import { Organization } from '../../src/organizations/entities';
import { PayoutDeposit, PayoutQuote, PayoutTrip, PayoutTripTransition, SandboxRailInstruction, type PaymentMethod } from '../../src/payouts/entities';
import { payoutRefundFlow } from '../../src/payouts/flows/refund';
import { payoutTripFlow } from '../../src/payouts/flows/trip';
import { resolveHeldFunds } from '../../src/payouts/resolution';
import { deskOrganizationId } from '../../src/payouts/desk';
import { Policy, PolicyAuditLog, PolicyRule } from '../../src/policies/entities';
import { workflowBundle, type ServiceWorkers } from '../../src/worker-setup';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { releaseTimeSkippingTemporal, testConfig, testOrm, timeSkippingTemporal } from '../support/environment';
import { eventually } from '../support/eventually';
import { tripEvents } from '../support/trip-events';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { assertLedgerReconciles } from '../support/ledger';
import { testLogger } from '../support/secret-scan';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const USDT = 1_000_000n;
/** Quotes of these tests hold two minutes: an expiry is a few polls away. */
const QUOTE_TTL_MS = 120_000;
const NG_BANK = { type: 'bank', accountNumber: '0123456789', bankCode: '058', accountName: 'Ada Obi' };
const KE_MOBILE = { type: 'mobile_money', phoneNumber: '+254712345678', network: 'MPESA', accountName: 'Wanjiru Kamau' };

interface QuoteTerms {
  assetId: string;
  chain: ChainId;
  fromAmount: bigint;
  toAmount: bigint;
  country: string;
  toCurrency: string;
  paymentMethod: PaymentMethod;
}

/** 100 USDT on Tron for NGN 150,000.00 to a bank account. */
const USDT_TO_NGN: QuoteTerms = { assetId: 'USDT_TRX', chain: 'tron', fromAmount: 100n * USDT, toAmount: 15_000_000n, country: 'NG', toCurrency: 'NGN', paymentMethod: 'bank' };
/** 0.01 BTC for KES 80,000.00 to M-Pesa. */
const BTC_TO_KES: QuoteTerms = { assetId: 'BTC', chain: 'bitcoin', fromAmount: 1_000_000n, toAmount: 8_000_000n, country: 'KE', toCurrency: 'KES', paymentMethod: 'mobile_money' };

/**
 * One app and worker with its own payout settings (the resolutions are read by the activities), on
 * the time-skipping server; the devnet is driven by hand: deposits recorded, blocks mined and scanned.
 */
function withPayoutSettings(title: string, settings: Record<string, string>, body: (context: () => Context) => void, nodes?: (config: Record<string, string>) => Promise<ChainNodes>) {
  describe(title, () => {
    withContext(settings, body, nodes);
  });
}

function withContext(settings: Record<string, string>, body: (context: () => Context) => void, nodes?: (config: Record<string, string>) => Promise<ChainNodes>) {
  let context: Context;
  const taskQueue = `payout-trip-${randomUUID()}`;
  const config = {
    ...NO_SEARCH_ATTRIBUTES,
    TEMPORAL_TASK_QUEUE: taskQueue,
    CHAIN_CONFIRMATIONS_TRON: '2',
    CHAIN_CONFIRMATIONS_BITCOIN: '2',
    DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
    PAYOUT_LATE_PAYMENT_WATCH_HOURS: '1',
    ...settings,
  };
  let worker: ServiceWorkers;
  let running: Promise<void>;
  before(async () => {
    const env = await timeSkippingTemporal();
    const app = await startTestApp({ config, temporal: env });
    const org = await createTestOrganization('Payout trips');
    ({ worker } = await createTestWorker(env, taskQueue, config, undefined, nodes ? { chains: await nodes(config) } : {}));
    running = worker.run();
    context = new Context(env, app, org);
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await context?.app.close();
    await releaseTimeSkippingTemporal();
  });
  body(() => context);
  it('keeps every balance the trips credited equal to its journal', async () => {
    await assertLedgerReconciles(context.org.organizationId);
  });
}

class Context {
  constructor(
    readonly env: TestWorkflowEnvironment,
    readonly app: TestApp,
    readonly org: TestOrganization,
  ) {}

  em = async () => (await testOrm()).em.fork();

  /** A quote issued now (the pricing has its own tests): the trip's terms. */
  async quote(terms: QuoteTerms) {
    const em = await this.em();
    const quote = em.create(PayoutQuote, {
      organization: em.getReference(Organization, this.org.organizationId),
      environment: 'sandbox',
      assetId: terms.assetId,
      chain: terms.chain,
      toCurrency: terms.toCurrency,
      country: terms.country,
      paymentMethod: terms.paymentMethod,
      amountCurrency: terms.toCurrency,
      rate: '1500',
      fromAmount: terms.fromAmount.toString(),
      toAmount: terms.toAmount.toString(),
      fees: [],
      limits: { currency: terms.toCurrency, min_raw: '0', max_raw: '100000000000' },
      // The workflows' clock runs ahead of the wall clock once a test has skipped time.
      expiresAt: new Date((await this.env.currentTimeMs()) + QUOTE_TTL_MS),
    });
    await em.flush();
    return quote;
  }

  async initialize(terms: QuoteTerms, extra: { refundAddress?: string } = {}) {
    const quote = await this.quote(terms);
    const beneficiary = terms.paymentMethod === 'bank' ? NG_BANK : KE_MOBILE;
    const response = await this.app.request('POST', '/payouts/initialize', { key: this.org.secret, body: { quoteId: quote.id, reference: `trip-${randomUUID()}`, beneficiary, ...extra } });
    assert.equal(response.status, 201, response.text);
    return response.body as { tripId: string; depositAddress: string; assetId: string; chain: ChainId };
  }

  /** A transfer from the devnet faucet to the trip's address, recorded as the scanner records the mempool; then `blocks` mined and scanned. */
  async deposit(trip: { depositAddress: string; assetId: string; chain: ChainId }, amount: string, blocks: number) {
    const auth = { organizationId: this.org.organizationId, environment: 'sandbox' } as AuthContext;
    await (await this.em()).transactional((tx) => simulateDeposit(tx, this.app.deps.config, this.app.deps.chains, auth, { chain: trip.chain, address: trip.depositAddress, asset: trip.assetId, amount }));
    if (blocks > 0) await this.mine(trip.chain, blocks);
  }

  async mine(chain: ChainId, blocks: number) {
    await mineDevnetBlocks(await this.em(), chain, blocks);
    const orm = await testOrm();
    await scanChain(
      { chains: this.app.deps.chains, config: this.app.deps.config, log: testLogger('scan'), em: () => orm.em.fork(), transaction: (work) => this.app.deps.starter.transaction(orm.em.fork(), work) },
      { chain, environment: 'sandbox', maxBlocks: 10_000 },
    );
  }

  /** Lets the quote expire (the trip with it), then pays `amount` with its confirmations; returns once the trip's workflow has ended. */
  async payAfterExpiry(trip: { tripId: string; depositAddress: string; assetId: string; chain: ChainId }, amount: string) {
    await this.env.sleep('3 minutes');
    await eventually(async () => ((await this.trip(trip.tripId)).status === 'expired' ? true : undefined), 'the trip expired');
    await this.deposit(trip, amount, 2);
    assert.equal(await this.handle(trip.tripId).result(), 'expired');
  }

  handle(tripId: string) {
    return this.env.client.workflow.getHandle(payoutTripFlow.workflowId({ tripId }));
  }

  refundHandle(refundId: string) {
    return this.env.client.workflow.getHandle(payoutRefundFlow.workflowId({ refundId }));
  }

  /** The trip as `GET /payouts/trips/:tripId` answers it, refunds and timeline included. */
  async read(tripId: string) {
    const response = await this.app.request('GET', `/payouts/trips/${tripId}`, { key: this.org.secret });
    assert.equal(response.status, 200, response.text);
    return response.body;
  }

  async trip(tripId: string) {
    return (await this.em()).findOneOrFail(PayoutTrip, { id: tripId }, { populate: ['quote'] });
  }

  async timeline(tripId: string) {
    return (await (await this.em()).find(PayoutTripTransition, { trip: tripId }, { orderBy: { occurredAt: 'asc', id: 'asc' } })).map((entry) => entry.name);
  }

  async events(tripId: string) {
    return (await tripEvents(await this.em(), this.org.organizationId, tripId)).map((event) => event.type);
  }

  async rail(tripId: string) {
    return (await this.em()).findOne(SandboxRailInstruction, { tripId });
  }

  async setOutcome(tripId: string, outcome: string, failureReason?: string) {
    const response = await this.app.request('POST', `/v1/sandbox/payouts/trips/${tripId}/outcome`, { key: this.org.secret, body: { outcome, ...(failureReason ? { failureReason } : {}) } });
    assert.equal(response.status, 200, response.text);
  }

  async balance(currency: 'usdt' | 'sat') {
    return (await readBalances(await this.em(), this.org.organizationId, 'sandbox')).find((balance) => balance.currency === currency)!.available;
  }
}

/** The devnet behind a node that refuses every broadcast without taking it (a send fails at its first handing), while `refusing`. */
class RefusingNodes extends ChainNodes {
  refusing = false;

  override async provider(chain: ChainId, environment: Environment): Promise<ChainProvider> {
    const real = await super.provider(chain, environment);
    const refusing = () => this.refusing;
    return new Proxy(real, {
      get(target, property, receiver) {
        if (property === 'broadcast' && refusing()) return async () => Promise.reject(new TransactionRejectedError('fee_too_low', 'refused: fee_too_low'));
        const value = Reflect.get(target, property, receiver) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
}

describe('payoutTripWorkflow (time-skipping, the devnet)', () => {
  withPayoutSettings('with the default settings', {}, (context) => {
    it('expires a trip that received nothing by the quote expiry: expired, payouts.withdrawal.expired', async () => {
      const trip = await context().initialize(USDT_TO_NGN);
      await context().env.sleep('3 minutes');
      await eventually(async () => ((await context().trip(trip.tripId)).status === 'expired' ? true : undefined), 'the trip expired');
      // Ended, its workflow still runs: the late-payment watch, PAYOUT_LATE_PAYMENT_WATCH_HOURS (1) from the end, shown on the trip.
      const ended = await context().read(trip.tripId);
      const handle = context().handle(trip.tripId);
      assert.equal(ended.workflow_id, handle.workflowId);
      assert.equal((await handle.describe()).status.name, 'RUNNING');
      assert.equal(ended.late_payment_watch_until, new Date(Date.parse(ended.completedAt) + 3_600_000).toISOString());
      assert.equal(await handle.result(), 'expired');
      const row = await context().trip(trip.tripId);
      assert.equal(row.status, 'expired');
      assert.ok(row.completedAt);
      assert.deepEqual(await context().timeline(trip.tripId), ['awaiting_deposit', 'expired']);
      assert.deepEqual(await context().events(trip.tripId), ['payouts.withdrawal.expired']);
      assert.equal(await context().rail(trip.tripId), null, 'nothing reached the rail');
    });

    it('waits for the confirmations of a funding deposit before anything starts, then pays once (rule 8)', async () => {
      const trip = await context().initialize(USDT_TO_NGN);
      await context().deposit(trip, '100', 0);
      const funded = await eventually(async () => {
        const row = await context().trip(trip.tripId);
        return row.status === 'funded' ? row : undefined;
      }, 'the trip funded');
      assert.equal(funded.amountReceived, (100n * USDT).toString());
      assert.ok(funded.assetReceivedAt);
      assert.equal(funded.assetConfirmedAt, null);
      // Time passes while the deposit sits in the mempool: the trip stays funded and the rail hears nothing.
      await context().env.sleep('5 minutes');
      assert.equal((await context().trip(trip.tripId)).status, 'funded');
      assert.equal(await context().rail(trip.tripId), null);
      await context().mine('tron', 1);
      await context().env.sleep('1 minute');
      assert.equal((await context().trip(trip.tripId)).status, 'funded', 'one confirmation of two is not enough');

      await context().mine('tron', 1);
      const handle = context().handle(trip.tripId);
      assert.equal(await handle.result(), 'success');
      const done = await context().trip(trip.tripId);
      assert.ok(done.assetConfirmedAt && done.assetConfirmedAt >= done.assetReceivedAt!);
      assert.equal(done.payoutAmount, '15000000');
      assert.equal(done.rail, 'sandbox_bank');
      assert.equal(done.creditedAmount, null);
      const rail = (await context().rail(trip.tripId))!;
      assert.equal(rail.submissions, 1);
      assert.equal(rail.amount, '15000000');
      assert.equal(rail.currency, 'NGN');
      assert.ok(rail.paidAt);
      assert.deepEqual(await context().timeline(trip.tripId), ['awaiting_deposit', 'funded', 'asset_confirmed', 'processing', 'success']);
      assert.deepEqual(await context().events(trip.tripId), ['asset.received', 'payouts.processing', 'withdrawal.processing', 'payouts.withdrawal.success', 'withdrawal.success']);
      await recordHistoryIfAsked(handle, 'payout-trip');
    });

    it('pays an underpayment within the margin pro rata at the quoted rate, exactly (rule 7)', async () => {
      const trip = await context().initialize(USDT_TO_NGN);
      await context().deposit(trip, '98.765432', 2);
      assert.equal(await context().handle(trip.tripId).result(), 'success');
      const done = await context().trip(trip.tripId);
      assert.equal(done.amountReceived, '98765432');
      // 15,000,000 × 98,765,432 / 100,000,000 = 14,814,814.8: rounded down to the kobo.
      assert.equal(done.payoutAmount, '14814814');
      assert.equal((await context().rail(trip.tripId))!.amount, '14814814');
      const processing = await (await context().em()).findOneOrFail(Event, { organization: context().org.organizationId, type: 'payouts.processing', dedupeKey: `payouts.processing:${trip.tripId}` });
      assert.equal((processing.data as { payoutAmount: string }).payoutAmount, '148148.14');
      assert.equal((processing.data as { amountReceived: string }).amountReceived, '98.765432');
    });

    it('pays the quoted amount on an overpayment and credits the excess to the USDT balance (rule 7)', async () => {
      const before = await context().balance('usdt');
      const trip = await context().initialize(USDT_TO_NGN);
      await context().deposit(trip, '60', 0);
      await context().deposit(trip, '45.5', 2);
      assert.equal(await context().handle(trip.tripId).result(), 'success');
      const done = await context().trip(trip.tripId);
      assert.equal(done.amountReceived, '105500000');
      assert.equal(done.payoutAmount, '15000000');
      assert.equal(done.creditedAmount, '5500000');
      assert.equal((await context().balance('usdt')) - before, 5_500_000n);
      assert.deepEqual(await context().timeline(trip.tripId), ['awaiting_deposit', 'funded', 'asset_confirmed', 'excess_credited', 'processing', 'success']);
    });

    it('holds an underpayment beyond the margin for resolution (PAYOUT_UNDERPAYMENT_RESOLUTION=hold)', async () => {
      const trip = await context().initialize(USDT_TO_NGN);
      await context().deposit(trip, '97.99', 2);
      assert.equal(await context().handle(trip.tripId).result(), 'held');
      const done = await context().trip(trip.tripId);
      assert.equal(done.holdReason, 'underpaid_beyond_margin');
      assert.equal(done.payoutAmount, null);
      assert.equal(await context().rail(trip.tripId), null);
    });

    it('fails a payout the rail rejects, with its failure_reason, and credits the funds back (rule 9)', async () => {
      const before = await context().balance('usdt');
      const trip = await context().initialize(USDT_TO_NGN);
      await context().setOutcome(trip.tripId, 'failed', 'account_closed');
      await context().deposit(trip, '100', 2);
      assert.equal(await context().handle(trip.tripId).result(), 'failed');
      const done = await context().trip(trip.tripId);
      assert.equal(done.failureReason, 'account_closed');
      assert.equal(done.creditedAmount, '100000000');
      assert.equal((await context().balance('usdt')) - before, 100n * USDT);
      assert.equal((await context().rail(trip.tripId))!.paidAt, null);
      assert.deepEqual((await context().events(trip.tripId)).slice(-2), ['payouts.withdrawal.failed', 'withdrawal.failed']);
      const failed = await (await context().em()).findOneOrFail(Event, { organization: context().org.organizationId, dedupeKey: `payouts.withdrawal.failed:${trip.tripId}` });
      assert.equal((failed.data as { failure_reason: string }).failure_reason, 'account_closed');
    });

    it('fails a payout a compliance check blocks (rule 9)', async () => {
      const trip = await context().initialize(BTC_TO_KES);
      await context().setOutcome(trip.tripId, 'blocked');
      await context().deposit(trip, '0.01', 2);
      assert.equal(await context().handle(trip.tripId).result(), 'failed');
      const done = await context().trip(trip.tripId);
      assert.equal(done.failureReason, 'risk_check_declined', "the mobile-money rail's own reason");
      assert.equal(done.rail, 'sandbox_mobile_money');
      const failed = await (await context().em()).findOneOrFail(PayoutTripTransition, { trip: trip.tripId, name: 'failed' });
      assert.deepEqual(failed.details, { failure_reason: 'risk_check_declined', stage: 'compliance' });
    });

    it('asks again while the rail answer is unknown and pays exactly once when it is known', async function () {
      this.timeout(180_000); // two hours of polls, each a real activity
      const trip = await context().initialize(USDT_TO_NGN);
      await context().setOutcome(trip.tripId, 'unknown');
      await context().deposit(trip, '100', 2);
      await eventually(async () => ((await context().rail(trip.tripId))?.submissions === 1 ? true : undefined), 'the instruction at the rail');
      // Hours of unknown answers: the trip stays processing and the instruction is never sent again.
      await context().env.sleep('2 hours');
      assert.equal((await context().trip(trip.tripId)).status, 'processing');
      assert.equal((await context().rail(trip.tripId))!.submissions, 1);
      assert.equal((await context().rail(trip.tripId))!.paidAt, null);
      await context().setOutcome(trip.tripId, 'success');
      assert.equal(await context().handle(trip.tripId).result(), 'success');
      const rail = (await context().rail(trip.tripId))!;
      assert.equal(rail.submissions, 1, 'sent once');
      assert.ok(rail.paidAt, 'paid once');
      assert.ok((await context().timeline(trip.tripId)).includes('rail_answer_unknown'));
    });

    it('credits a payment that arrives after expiry to the balance (PAYOUT_LATE_PAYMENT_RESOLUTION=credit)', async () => {
      const before = await context().balance('usdt');
      const trip = await context().initialize(USDT_TO_NGN);
      await context().payAfterExpiry(trip, '100');
      assert.equal((await context().balance('usdt')) - before, 100n * USDT);
      const deposit = await (await context().em()).findOneOrFail(PayoutDeposit, { trip: trip.tripId });
      assert.equal(deposit.role, 'late');
      assert.equal(deposit.resolution, 'credit');
      assert.deepEqual(await context().timeline(trip.tripId), ['awaiting_deposit', 'expired', 'late_payment_received', 'late_payment_credited']);
      assert.equal(await context().rail(trip.tripId), null);
    });

    it('replays the recorded payout trip history with the current workflow code', async () => {
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('payout-trip'), 'payout-trip');
    });
  });

  withPayoutSettings('refunding late payments, crediting underpayments', { PAYOUT_LATE_PAYMENT_RESOLUTION: 'refund', PAYOUT_UNDERPAYMENT_RESOLUTION: 'credit' }, (context) => {
    async function refundAddress() {
      const vault = await context().app.request('POST', '/v1/vaults', { key: context().org.secret, body: { name: 'Refunds' } });
      const wallet = await context().app.request('POST', '/v1/wallets', { key: context().org.secret, body: { name: 'Refunds', chain: 'bitcoin', vault_id: vault.body.id } });
      assert.equal(wallet.status, 201, wallet.text);
      return wallet.body.primary_address.address as string;
    }

    it('refunds a payment that arrives after the trip ended to the refund address, its fee out of the amount, and follows the send to refunded', async () => {
      const to = await refundAddress();
      const trip = await context().initialize(BTC_TO_KES, { refundAddress: to });
      await context().deposit(trip, '0.01', 2);
      await context().env.sleep('1 minute');
      await eventually(async () => ((await context().trip(trip.tripId)).status === 'success' ? true : undefined), 'the trip paid');
      await context().deposit(trip, '0.002', 2);
      await context().env.sleep('5 minutes');
      const late = await eventually(
        async () => (await (await context().em()).findOne(PayoutDeposit, { trip: trip.tripId, role: 'late', resolution: 'refund' }, { populate: ['refund.transaction'] })) ?? undefined,
        'the late payment refunded',
      );
      const pending = await context().read(trip.tripId);
      assert.deepEqual(
        pending.refunds.map((refund: { status: string; reason: string; attempts: number }) => [refund.status, refund.reason, refund.attempts]),
        [['refund_pending', 'late_payment', 1]],
        'the refund is pending until its send settles',
      );
      // The refund's send confirms once blocks are mined; its workflow sees it settled.
      await context().mine('bitcoin', 2);
      const followed = context().refundHandle(late.refund!.id);
      assert.equal(await followed.result(), 'refunded');
      assert.equal(await context().handle(trip.tripId).result(), 'success');
      const refund = late.refund!.transaction;
      assert.equal(refund.toAddress, to);
      assert.equal(refund.amount, '200000', 'the whole late payment');
      assert.equal(refund.gross, true, 'its fee out of the amount');
      const done = await context().read(trip.tripId);
      assert.equal(done.refunds[0].status, 'refunded');
      assert.equal(done.refunds[0].transactionId, refund.id);
      assert.ok(done.refunds[0].txHash && done.refunds[0].completedAt);
      assert.deepEqual((await context().timeline(trip.tripId)).slice(-3), ['late_payment_received', 'refund_pending', 'refunded']);
      await recordHistoryIfAsked(followed, 'payout-refund');
    });

    it('replays the recorded payout refund history (a late payment refunded) with the current workflow code', async () => {
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('payout-refund'), 'payout-refund');
    });

    /**
     * The payout_refund row of the movement gate's table (test/api/movement-gate.test.ts has the
     * others): a refund leaves the service's payout desk, so the desk organization's policies judge
     * it, with actor system. A refused refund holds the late payment, naming the refusal.
     */
    describe('the movement gate judges the refund (the payout desk\'s policies)', () => {
      const refundRules = {
        block: { actionType: 'block', actionConfig: {}, conditions: [] },
        approval: { actionType: 'require_approval', actionConfig: { approvers: [{ id: 'desk-approver', type: 'user' }], required_approvals: 1, expiry_hours: 4 }, conditions: [] },
        actor: {
          actionType: 'block',
          actionConfig: {},
          conditions: [
            { field: 'actor_type', operator: 'equal', value: 'system' },
            { field: 'actor_id', operator: 'equal', value: 'system' },
            { field: 'is_automated', operator: 'equal', value: true },
          ],
        },
        alert: { actionType: 'alert', actionConfig: {}, conditions: [] },
      } as const;
      let policyId: string | undefined;
      afterEach(async () => {
        if (policyId) await (await context().em()).nativeUpdate(Policy, { id: policyId }, { status: 'archived' });
        policyId = undefined;
      });

      for (const [action, rule] of Object.entries(refundRules)) {
        it(`${action}: ${action === 'alert' ? 'the refund goes, the alert recorded' : 'the refund is refused and the late payment held, nothing sent'}`, async () => {
          const em = await context().em();
          const deskId = await deskOrganizationId(em, context().app.deps.config);
          const desk = em.getReference(Organization, deskId);
          const policy = em.create(Policy, { organization: desk, environment: 'sandbox', name: `Refunds ${action}`, description: '', category: 'access', priority: 100, status: 'enforced', createdBy: 'test', createdByName: 'Test', createdAt: new Date(), updatedAt: new Date() });
          em.create(PolicyRule, {
            policy,
            name: 'On payout refunds',
            order: 0,
            ...rule,
            conditions: [{ field: 'operation_type', operator: 'equal', value: 'payout_refund' }, ...rule.conditions],
          } as never);
          await em.flush();
          policyId = policy.id;

          const trip = await context().initialize(BTC_TO_KES, { refundAddress: await refundAddress() });
          await context().env.sleep('3 minutes');
          await eventually(async () => ((await context().trip(trip.tripId)).status === 'expired' ? true : undefined), 'the trip expired');
          await context().deposit(trip, '0.002', 2);
          await context().env.sleep('5 minutes');
          const late = await eventually(
            async () => (await (await context().em()).findOne(PayoutDeposit, { trip: trip.tripId, role: 'late', resolvedAt: { $ne: null } })) ?? undefined,
            'the late payment resolved',
          );
          // A refund sent is followed to its confirmations before the trip's workflow ends.
          if (late.refund) await context().mine('bitcoin', 2);
          assert.equal(await context().handle(trip.tripId).result(), 'expired');
          const decisions = await (await context().em()).find(PolicyAuditLog, { organization: deskId, policyId: policy.id, action: 'decision' });
          assert.equal(decisions.length, 1, 'the refund was decided once, by the desk organization');
          const request = (decisions[0]!.metadata as { request: Record<string, unknown> }).request;
          assert.equal(request.operation_type, 'payout_refund');
          assert.equal(request.actor_type, 'system');
          assert.equal(request.automation_rule_id, `payout-trip-${trip.tripId}`);
          assert.equal(decisions[0]!.actorId, 'system');
          if (action === 'alert') {
            assert.equal(late.resolution, 'refund');
            assert.ok(late.refund, 'the refund was sent');
            assert.equal(await (await context().em()).count(PolicyAuditLog, { organization: deskId, policyId: policy.id, action: 'alert' }), 1);
            return;
          }
          assert.equal(late.resolution, 'hold');
          assert.equal(late.refund ?? null, null, 'no refund sent');
          const held = await (await context().em()).findOneOrFail(PayoutTripTransition, { trip: trip.tripId, name: 'late_payment_held' });
          assert.equal(held.details.reason, `refund_refused:${action === 'approval' ? 'policy_approval_required' : 'policy_blocked'}`);
        });
      }
    });

    it('holds a late payment when refunds are configured but the trip has no refund address', async () => {
      const trip = await context().initialize(USDT_TO_NGN);
      await context().payAfterExpiry(trip, '10');
      const late = await (await context().em()).findOneOrFail(PayoutTripTransition, { trip: trip.tripId, name: 'late_payment_held' });
      assert.equal(late.details.reason, 'no_refund_address');
    });

    it('credits an underpayment beyond the margin and fails the payout (PAYOUT_UNDERPAYMENT_RESOLUTION=credit)', async () => {
      const before = await context().balance('usdt');
      const trip = await context().initialize(USDT_TO_NGN);
      await context().deposit(trip, '50', 2);
      assert.equal(await context().handle(trip.tripId).result(), 'failed');
      const done = await context().trip(trip.tripId);
      assert.equal(done.failureReason, 'underpaid_beyond_margin');
      assert.equal((await context().balance('usdt')) - before, 50n * USDT);
      assert.equal(await context().rail(trip.tripId), null);
    });
  });

  withPayoutSettings('holding late payments', { PAYOUT_LATE_PAYMENT_RESOLUTION: 'hold' }, (context) => {
    it('holds a payment that arrives after expiry for manual resolution (hold)', async () => {
      const before = await context().balance('usdt');
      const trip = await context().initialize(USDT_TO_NGN);
      await context().payAfterExpiry(trip, '100');
      const deposit = await (await context().em()).findOneOrFail(PayoutDeposit, { trip: trip.tripId });
      assert.equal(deposit.resolution, 'hold');
      assert.equal(await context().balance('usdt'), before, 'nothing credited');
      assert.deepEqual((await context().timeline(trip.tripId)).slice(-1), ['late_payment_held']);
    });
  });

  const refusing = { nodes: undefined as RefusingNodes | undefined };
  withPayoutSettings(
    'refunds whose sends fail',
    { PAYOUT_LATE_PAYMENT_RESOLUTION: 'refund', PAYOUT_REFUND_ATTEMPTS: '2' },
    (context) => {
      it('replaces a failed refund send once, then ends refund_failed with the money held in the desk; an operator credits it', async () => {
        const vault = await context().app.request('POST', '/v1/vaults', { key: context().org.secret, body: { name: 'Refunds' } });
        const wallet = await context().app.request('POST', '/v1/wallets', { key: context().org.secret, body: { name: 'Refunds', chain: 'bitcoin', vault_id: vault.body.id } });
        const trip = await context().initialize(BTC_TO_KES, { refundAddress: wallet.body.primary_address.address });
        const before = await context().balance('sat');
        refusing.nodes!.refusing = true;
        await context().payAfterExpiry(trip, '0.002');
        const late = await (await context().em()).findOneOrFail(PayoutDeposit, { trip: trip.tripId }, { populate: ['refund'] });
        assert.ok(late.refund, 'a refund was sent');
        const followed = context().refundHandle(late.refund.id);
        assert.equal(await followed.result(), 'refund_failed');
        await recordHistoryIfAsked(followed, 'payout-refund-failed');

        const em = await context().em();
        const sends = await em.find(OutgoingTransaction, { note: { $like: `Refund of payout trip ${trip.tripId}%` } }, { orderBy: { createdAt: 'asc' } });
        assert.deepEqual(sends.map((send) => [send.status, send.failureReason]), [['failed', 'fee_too_low'], ['failed', 'fee_too_low']], 'two sends, both refused: nothing left the desk');
        const held = await em.findOneOrFail(PayoutDeposit, { id: late.id }, { populate: ['refund'] });
        assert.equal(held.resolution, 'hold', 'the money is held for an operator, not credited');
        assert.equal(await context().balance('sat'), before, 'nothing credited');
        const [locks] = await em.execute<{ locked: string }[]>(`select coalesce(sum(locked), 0)::text as locked from wallet_balances where wallet_id = ?`, [sends[0]!.wallet.id]);
        assert.equal(locks!.locked, '0', "the desk's locks are released");
        const read = await context().read(trip.tripId);
        assert.deepEqual(
          read.refunds.map((refund: { status: string; attempts: number; failure_reason: string; transactionId: string }) => [refund.status, refund.attempts, refund.failure_reason, refund.transactionId]),
          [['refund_failed', 2, 'fee_too_low', sends[1]!.id]],
        );
        assert.deepEqual((await context().timeline(trip.tripId)).slice(-4), ['late_payment_received', 'refund_pending', 'refund_retried', 'refund_failed']);
        assert.deepEqual(await context().events(trip.tripId), ['payouts.withdrawal.expired', 'payouts.refund.failed']);

        // The operator's way out: credited once, audited; a second resolution finds nothing held.
        refusing.nodes!.refusing = false;
        const deps = { config: context().app.deps.config, chains: context().app.deps.chains, keys: context().app.deps.keys, em: () => em.fork(), transaction: <T>(work: (tx: typeof em) => Promise<T>) => em.fork().transactional(work) };
        const resolved = await em.fork().transactional((tx) => resolveHeldFunds(tx, deps, { tripId: trip.tripId, resolution: 'credit', operator: 'ops@example.com' }));
        assert.equal(resolved.resolved[0]!.amount_raw, '200000');
        assert.equal((await context().balance('sat')) - before, 200_000n);
        await assert.rejects(
          em.fork().transactional((tx) => resolveHeldFunds(tx, deps, { tripId: trip.tripId, resolution: 'credit', operator: 'ops@example.com' })),
          /already resolved/,
        );
        assert.equal((await context().balance('sat')) - before, 200_000n, 'credited once');
      });

      it('replays the recorded history of a refund whose sends failed (a send replaced, then refund_failed) with the current workflow code', async () => {
        await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('payout-refund-failed'), 'payout-refund-failed');
      });
    },
    async (config) => (refusing.nodes = new RefusingNodes(testConfig(config), testLogger('nodes'), await testOrm())),
  );
});
