import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { applyBalanceEntry } from '../../src/balances/service';
import { Event } from '../../src/events/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { lndLiveConfig, lndSandboxConfig, startLightningNetworkOrSkip, type LightningNetwork } from '../support/lnd';
import { RestartableWorker } from '../support/worker';

const sha256Hex = (hex: string) => createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex');

interface Payment {
  id: string;
  status: string;
  payment_hash: string;
  preimage: string | null;
  amount_sat: string;
  fee_sat: string;
  failure_reason: string | null;
}

/**
 * The LND provider against two real LND nodes on btcd (regtest): `ours` is the sandbox environment's node
 * (LIGHTNING_LND_SANDBOX_*), `theirs` a peer with one channel to it. Through the real app, Temporal and
 * PostgreSQL: payments go out with the fee limit and are followed to the node's final answer, our invoices
 * are issued by our node and settled into the ledger from its invoice subscription.
 */
describe('Lightning through LND (two nodes on btcd regtest)', function () {
  this.timeout(240_000);
  let network: LightningNetwork;
  let app: TestApp;
  let worker: RestartableWorker;
  let org: TestOrganization;

  before(async function () {
    this.timeout(300_000);
    network = await startLightningNetworkOrSkip(this);
    const config = { TEMPORAL_TASK_QUEUE: `lnd-${randomUUID()}`, ...lndSandboxConfig(network.ours) };
    app = await startTestApp({ config });
    worker = new RestartableWorker(config.TEMPORAL_TASK_QUEUE, config);
    await worker.start();
    org = await createTestOrganization('LND payer');
    await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: { currency: 'sat', amount: '100000' } });
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    await network?.stop();
  });

  const satBalance = async () => {
    const response = await app.request('GET', '/v1/balances', { key: org.secret });
    const sat = response.body.data.find((balance: { unit: string }) => balance.unit === 'sat') as { available: string; reserved: string };
    return { available: BigInt(sat.available), reserved: BigInt(sat.reserved) };
  };
  const theirInvoice = async (amountSat: number, memo: string) => {
    const added = await network.theirs.node.call<{ payment_request: string; r_hash: string }>('POST', '/v1/invoices', { value: String(amountSat), memo });
    return { request: added.payment_request, paymentHash: Buffer.from(added.r_hash, 'base64').toString('hex') };
  };
  const pay = async (body: Record<string, unknown>): Promise<Payment> => {
    const created = await app.request('POST', '/api/lightning/payments', { key: org.secret, body: { reference: randomUUID(), ...body } });
    assert.equal(created.status, 201, created.text);
    return created.body.data as Payment;
  };
  const invoiceStatus = async (id: string) => (await app.request('GET', `/api/lightning/invoices/${id}`, { key: org.secret })).body.data.status as string;
  const invoicePaid = (id: string, what: string) => eventually(async () => ((await invoiceStatus(id)) === 'paid' ? true : undefined), what, 30_000, 200);
  const finished = (id: string, timeoutMs = 60_000) =>
    eventually(
      async () => {
        const payment = (await app.request('GET', `/api/lightning/payments/${id}`, { key: org.secret })).body.data as Payment;
        return payment.status === 'pending' ? undefined : payment;
      },
      `payment ${id} to end`,
      timeoutMs,
      200,
    );

  it("pays the other node's invoice: the exact amount arrives, the fee stays within the limit, the preimage is the hash's", async () => {
    const before = await satBalance();
    const invoice = await theirInvoice(1_234, 'a coffee over LND');
    const preview = await app.request('POST', '/api/lightning/payments/initiate', { key: org.secret, body: { request: invoice.request } });
    assert.equal(preview.status, 200, preview.text);
    assert.equal(preview.body.route_found, true, 'our node found a route to theirs');

    const payment = await pay({ request: invoice.request, max_fee: 10 });
    const done = await finished(payment.id);
    assert.equal(done.status, 'paid', JSON.stringify(done));
    assert.equal(done.preimage && sha256Hex(done.preimage), invoice.paymentHash, 'the preimage our node got hashes to the invoice');
    assert.ok(BigInt(done.fee_sat) <= 10n, `fee ${done.fee_sat} within max_fee`);

    const theirs = await network.theirs.node.call<{ state: string; amt_paid_msat: string }>('GET', `/v1/invoice/${invoice.paymentHash}`);
    assert.equal(theirs.state, 'SETTLED');
    assert.equal(theirs.amt_paid_msat, '1234000', 'exactly the invoice amount arrived');
    assert.deepEqual(await satBalance(), { available: before.available - 1_234n - BigInt(done.fee_sat), reserved: 0n });
  });

  it('the other node pays our invoice: issued by our node, paid once, the ledger credited, lightning.invoice.paid recorded', async () => {
    const before = await satBalance();
    const created = await app.request('POST', '/api/lightning/invoices', { key: org.secret, body: { amount: 2_100, description: 'two coffees, over LND', reference: randomUUID() } });
    assert.equal(created.status, 201, created.text);
    const invoice = created.body as { id: string; request: string; payment_hash: string };
    assert.ok(invoice.request.startsWith('lnbcrt21u'), `a regtest invoice of our node: ${invoice.request}`);
    const decoded = await network.theirs.node.call<{ destination: string; payment_hash: string; route_hints?: unknown[] }>('GET', `/v1/payreq/${invoice.request}`);
    assert.equal(decoded.destination, network.ours.pubkey, 'our LND issued it');
    assert.equal(decoded.payment_hash, invoice.payment_hash);
    assert.equal(decoded.route_hints?.length ?? 0, 0, 'no route hints: our channel is public (test/lightning/lnd-invoices.test.ts has a private one)');

    const sent = await network.theirs.node.call<{ payment_error?: string; payment_preimage: string }>('POST', '/v1/channels/transactions', { payment_request: invoice.request });
    assert.ok(!sent.payment_error, sent.payment_error ?? '');
    assert.equal(sha256Hex(Buffer.from(sent.payment_preimage, 'base64').toString('hex')), invoice.payment_hash);

    await invoicePaid(invoice.id, 'our invoice to be settled from the subscription');
    assert.deepEqual(await satBalance(), { available: before.available + 2_100n, reserved: 0n });
    const events = await (await testOrm()).em.fork().find(Event, { organization: org.organizationId, type: 'lightning.invoice.paid' });
    assert.deepEqual(
      events.filter((event) => (event.data as { id: string }).id === invoice.id).length,
      1,
      'one lightning.invoice.paid event (its webhook deliveries start from it)',
    );
  });

  it('an invoice paid while no worker watched is caught up when one starts again, and credited once', async () => {
    const before = await satBalance();
    await worker.stop();
    const created = await app.request('POST', '/api/lightning/invoices', { key: org.secret, body: { amount: 3_300, description: 'paid while nobody watched', reference: randomUUID() } });
    assert.equal(created.status, 201, created.text);
    const invoice = created.body as { id: string; request: string };
    const sent = await network.theirs.node.call<{ payment_error?: string }>('POST', '/v1/channels/transactions', { payment_request: invoice.request });
    assert.ok(!sent.payment_error, sent.payment_error ?? '');
    assert.equal(await invoiceStatus(invoice.id), 'pending', 'nothing watched the node');

    await worker.start();
    await invoicePaid(invoice.id, 'the restarted watch to catch the invoice up');
    assert.deepEqual(await satBalance(), { available: before.available + 3_300n, reserved: 0n });
  });

  it("an invoice the other node refuses fails with the node's reason, and the whole reserve is released", async () => {
    const before = await satBalance();
    const invoice = await theirInvoice(777, 'cancelled before it was paid');
    await network.theirs.node.call('POST', '/v2/invoices/cancel', { payment_hash: Buffer.from(invoice.paymentHash, 'hex').toString('base64') });

    const payment = await pay({ request: invoice.request, max_fee: 5 });
    const done = await finished(payment.id);
    assert.equal(done.status, 'failed');
    assert.equal(done.failure_reason, 'incorrect_payment_details', 'the destination refused it: LND names that reason');
    assert.deepEqual(await satBalance(), before, 'nothing spent, nothing left reserved');
  });

  it('a live key with no live node configured gets 503 lightning_node_unavailable, never a stand-in', async () => {
    const live = await org.key(['*'], 'live');
    const invoice = await app.request('POST', '/api/lightning/invoices', { key: live.secret, body: { amount: 1_000, description: 'live', reference: randomUUID() } });
    assert.equal(invoice.status, 503, invoice.text);
    assert.equal(invoice.body.error.code, 'lightning_node_unavailable');
    const { request } = await theirInvoice(1_000, 'for a live key');
    for (const [path, body] of [
      ['/api/lightning/payments', { request, reference: randomUUID() }],
      ['/api/lightning/payments/initiate', { request }],
    ] as const) {
      const refused = await app.request('POST', path, { key: live.secret, body });
      assert.equal(refused.status, 503, `${path}: ${refused.text}`);
      assert.equal(refused.body.error.code, 'lightning_node_unavailable');
    }
  });

  describe('with a live key (a staging deployment whose live node runs on regtest)', () => {
    let liveApp: TestApp;
    let liveWorker: RestartableWorker;
    let live: string;

    before(async () => {
      const config = { TEMPORAL_TASK_QUEUE: `lnd-live-${randomUUID()}`, ...lndLiveConfig(network.ours) };
      liveApp = await startTestApp({ config });
      liveWorker = new RestartableWorker(config.TEMPORAL_TASK_QUEUE, config);
      await liveWorker.start();
      live = (await org.key(['*'], 'live')).secret;
      await (await testOrm()).em
        .fork()
        .transactional((tx) => applyBalanceEntry(tx, { organizationId: org.organizationId, environment: 'live', currency: 'sat', kind: 'credit', amount: 20_000n, reference: { type: 'sandbox_credit', id: randomUUID() } }));
    });
    after(async () => {
      await liveWorker?.stop();
      await liveApp?.close();
    });

    const liveSats = async () => {
      const response = await liveApp.request('GET', '/v1/balances', { key: live });
      const sat = response.body.data.find((balance: { unit: string }) => balance.unit === 'sat') as { available: string; reserved: string };
      return { available: BigInt(sat.available), reserved: BigInt(sat.reserved) };
    };

    it('pays their invoice and is paid by them through the API: the live ledger moves by exactly the amounts and the fee', async () => {
      const invoice = await theirInvoice(1_500, 'a live coffee');
      const created = await liveApp.request('POST', '/api/lightning/payments', { key: live, body: { request: invoice.request, max_fee: 20, reference: randomUUID() } });
      assert.equal(created.status, 201, created.text);
      const payment = await eventually(
        async () => {
          const read = (await liveApp.request('GET', `/api/lightning/payments/${created.body.data.id}`, { key: live })).body.data as Payment;
          return read.status === 'pending' ? undefined : read;
        },
        'the live payment to end',
        60_000,
        200,
      );
      assert.equal(payment.status, 'paid', JSON.stringify(payment));
      assert.equal(sha256Hex(payment.preimage!), invoice.paymentHash, 'the preimage is the hash of their invoice');
      const paidTheirs = await network.theirs.node.call<{ state: string; amt_paid_sat: string }>('GET', `/v1/invoice/${invoice.paymentHash}`);
      assert.deepEqual([paidTheirs.state, paidTheirs.amt_paid_sat], ['SETTLED', '1500']);
      assert.deepEqual(await liveSats(), { available: 20_000n - 1_500n - BigInt(payment.fee_sat), reserved: 0n });

      const before = await liveSats();
      const ours = await liveApp.request('POST', '/api/lightning/invoices', { key: live, body: { amount: 700, description: 'a live refund', reference: randomUUID() } });
      assert.equal(ours.status, 201, ours.text);
      assert.ok((ours.body.request as string).startsWith('lnbcrt7u'), `issued by our live node on regtest: ${ours.body.request}`);
      const sent = await network.theirs.node.call<{ payment_error?: string }>('POST', '/v1/channels/transactions', { payment_request: ours.body.request });
      assert.ok(!sent.payment_error, sent.payment_error ?? '');
      await eventually(
        async () => ((await liveApp.request('GET', `/api/lightning/invoices/${ours.body.id}`, { key: live })).body.data.status === 'paid' ? true : undefined),
        'our live invoice to be settled from the subscription',
        30_000,
        200,
      );
      assert.deepEqual(await liveSats(), { available: before.available + 700n, reserved: 0n });
    });

    it('a live node on another network than live expects is never used: 503 lightning_node_unavailable, network_mismatch', async () => {
      // The default: live pays mainnet invoices, and this node runs on regtest.
      const { LIGHTNING_LND_LIVE_NETWORK: _regtest, ...mainnetExpected } = lndLiveConfig(network.ours);
      const strict = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: `lnd-strict-${randomUUID()}`, ...mainnetExpected } });
      try {
        const invoice = await strict.request('POST', '/api/lightning/invoices', { key: live, body: { amount: 1_000, description: 'never issued', reference: randomUUID() } });
        assert.equal(invoice.status, 503, invoice.text);
        assert.equal(invoice.body.error.code, 'lightning_node_unavailable');
        assert.deepEqual(invoice.body.error.details, { reason: 'network_mismatch' }, 'no retry hint: the mismatch is remembered until restart');
        assert.match(invoice.body.error.message, /runs on regtest; this environment pays mainnet invoices/);
        const before = await liveSats();
        const { request } = await theirInvoice(1_000, 'never paid');
        const refused = await strict.request('POST', '/api/lightning/payments', { key: live, body: { request, reference: randomUUID() } });
        assert.equal(refused.status, 400, refused.text);
        assert.equal(refused.body.error.code, 'invalid_payment_request', 'a regtest invoice is not a mainnet one');
        assert.deepEqual(await liveSats(), before, 'nothing reserved');
      } finally {
        await strict.close();
      }
    });
  });

  it('a payment in flight while our node is killed is re-queried after its restart and settled once', async () => {
    const before = await satBalance();
    // A hold invoice: the payment stays in flight until they settle it with the preimage.
    const preimage = randomBytes(32);
    const paymentHash = sha256Hex(preimage.toString('hex'));
    const held = await network.theirs.node.call<{ payment_request: string }>('POST', '/v2/invoices/hodl', { hash: Buffer.from(paymentHash, 'hex').toString('base64'), value: '4321', memo: 'held' });
    const payment = await pay({ request: held.payment_request, max_fee: 10 });
    const theirInvoiceState = async () => (await network.theirs.node.call<{ state: string }>('GET', `/v1/invoice/${paymentHash}`)).state;
    await eventually(async () => ((await theirInvoiceState()) === 'ACCEPTED' ? true : undefined), 'the HTLC to reach them', 60_000, 200);

    await network.ours.kill();
    await network.ours.restart();
    assert.equal((await app.request('GET', `/api/lightning/payments/${payment.id}`, { key: org.secret })).body.data.status, 'pending', 'still unknown: never failed blind');
    // Once the channel is back, they take the payment.
    await eventually(
      async () => {
        await network.theirs.node.call('POST', '/v2/invoices/settle', { preimage: preimage.toString('base64') }).catch(() => undefined);
        return (await theirInvoiceState()) === 'SETTLED' ? true : undefined;
      },
      'them to settle the held invoice',
      60_000,
      500,
    );
    const done = await finished(payment.id, 120_000);
    assert.equal(done.status, 'paid');
    assert.equal(done.preimage, preimage.toString('hex'));
    assert.deepEqual(await satBalance(), { available: before.available - 4_321n - BigInt(done.fee_sat), reserved: 0n }, 'captured once');
  });
});
