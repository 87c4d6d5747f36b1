import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { decodeBolt11 } from '../../src/lightning/bolt11';
import { committedClaims } from '../../src/lightning/claims';
import { LightningInvoice } from '../../src/lightning/entities';
import { LndProvider } from '../../src/lightning/lnd-provider';
import { paymentOrder } from '../../src/lightning/payments';
import { insertRowUnlessTaken } from '../../src/lightning/service';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { cli } from '../support/cli';
import { localTemporal, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { assertLedgerReconciles } from '../support/ledger';
import { lndSandboxConfig, startHiddenPayee, startLightningNetworkOrSkip, type LightningNetwork } from '../support/lnd';
import { RestartableWorker } from '../support/worker';

const sha256Hex = (hex: string) => createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex');
const base64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');

interface Payment {
  id: string;
  status: string;
  preimage: string;
  fee_sat: string;
  failure_reason: string | null;
  held_at: string | null;
  held_reason: string | null;
}

/**
 * LND payments on a node every organization shares (two LND nodes on btcd regtest: `ours` is the sandbox
 * environment's, `theirs` the payee), through the real app, Temporal and PostgreSQL: a payment hash is paid
 * once per node whoever asks, refusals LND will never accept end the payment failed with its reserve
 * released, transient failures hold it for an operator (its API shows the hold), invoices behind private channels
 * are payable (a payee reachable only through one, by its invoice's hint), and an amount no single channel
 * carries is previewed payable and paid in parts.
 */
describe('LND payments on a shared node (two nodes on btcd regtest)', function () {
  this.timeout(240_000);
  let network: LightningNetwork;
  let app: TestApp;
  let worker: RestartableWorker;
  let config: Record<string, string>;

  before(async function () {
    this.timeout(300_000);
    network = await startLightningNetworkOrSkip(this);
    // Two transient failures hold a payment: the held path within a test's time.
    config = { TEMPORAL_TASK_QUEUE: `lnd-payments-${randomUUID()}`, ...lndSandboxConfig(network.ours), LIGHTNING_LND_SEND_ATTEMPTS: '2' };
    app = await startTestApp({ config });
    worker = new RestartableWorker(config.TEMPORAL_TASK_QUEUE, config);
    await worker.start();
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    await network?.stop();
  });

  const fundedOrganization = async (name: string, sats = 50_000) => {
    const org = await createTestOrganization(name);
    await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: { currency: 'sat', amount: String(sats) } });
    return org;
  };
  const satBalance = async (org: TestOrganization) => {
    const response = await app.request('GET', '/v1/balances', { key: org.secret });
    const sat = response.body.data.find((balance: { unit: string }) => balance.unit === 'sat') as { available: string; reserved: string };
    return { available: BigInt(sat.available), reserved: BigInt(sat.reserved) };
  };
  const theirInvoice = async (body: Record<string, unknown>) => {
    const added = await network.theirs.node.call<{ payment_request: string; r_hash: string }>('POST', '/v1/invoices', body);
    return { request: added.payment_request, paymentHash: Buffer.from(added.r_hash, 'base64').toString('hex') };
  };
  const theirInvoiceState = async (paymentHash: string) => network.theirs.node.call<{ state: string; amt_paid_msat: string }>('GET', `/v1/invoice/${paymentHash}`);
  const pay = (org: TestOrganization, body: Record<string, unknown>) => app.request('POST', '/api/lightning/payments', { key: org.secret, body: { reference: randomUUID(), ...body } });
  const payCreated = async (org: TestOrganization, body: Record<string, unknown>) => {
    const created = await pay(org, body);
    assert.equal(created.status, 201, created.text);
    return created.body.data as Payment;
  };
  const ended = (org: TestOrganization, id: string, timeoutMs = 60_000, on = app) =>
    eventually(
      async () => {
        const payment = (await on.request('GET', `/api/lightning/payments/${id}`, { key: org.secret })).body.data as Payment;
        return payment.status === 'pending' ? undefined : payment;
      },
      `payment ${id} to end`,
      timeoutMs,
      200,
    );
  const assertAlreadyPaid = (answer: Awaited<ReturnType<typeof pay>>) => {
    assert.equal(answer.status, 409, answer.text);
    assert.equal(answer.body.error.code, 'invoice_already_paid');
    assert.equal(answer.body.error.details.payment_id, undefined, "another organization's payment is not named");
  };

  it('a second organization paying an invoice in flight, then paid, on the shared node: 409 invoice_already_paid, never debited', async () => {
    const [first, second] = [await fundedOrganization('first payer'), await fundedOrganization('second payer')];
    // A hold invoice keeps the first payment in flight until they settle it.
    const preimage = randomBytes(32).toString('hex');
    const paymentHash = sha256Hex(preimage);
    const held = await network.theirs.node.call<{ payment_request: string }>('POST', '/v2/invoices/hodl', { hash: base64(paymentHash), value: '2500', memo: 'held for two payers' });
    const payment = await payCreated(first, { request: held.payment_request, max_fee: 10 });
    await eventually(async () => ((await theirInvoiceState(paymentHash)).state === 'ACCEPTED' ? true : undefined), 'the HTLC to reach them', 60_000, 200);

    assertAlreadyPaid(await pay(second, { request: held.payment_request, max_fee: 10 }));
    await network.theirs.node.call('POST', '/v2/invoices/settle', { preimage: base64(preimage) });
    const paid = await ended(first, payment.id);
    assert.deepEqual([paid.status, paid.preimage], ['paid', preimage]);

    assertAlreadyPaid(await pay(second, { request: held.payment_request }));
    assert.deepEqual(await satBalance(second), { available: 50_000n, reserved: 0n }, 'the second payer: nothing reserved, nothing spent');
    assert.deepEqual(await satBalance(first), { available: 50_000n - 2_500n - BigInt(paid.fee_sat), reserved: 0n });
    assert.equal((await theirInvoiceState(paymentHash)).amt_paid_msat, '2500000', 'paid once');
  });

  it('two organizations paying one invoice at once: one payment goes out, the other is 409 and never debited', async () => {
    const payers = [await fundedOrganization('concurrent a'), await fundedOrganization('concurrent b')];
    const invoice = await theirInvoice({ value: '3100', memo: 'one invoice, two payers at once' });
    const answers = await Promise.all(payers.map((org) => pay(org, { request: invoice.request, max_fee: 10 })));
    assert.deepEqual(answers.map((answer) => answer.status).sort(), [201, 409], answers.map((answer) => answer.text).join('\n'));
    const winner = answers.findIndex((answer) => answer.status === 201);
    assertAlreadyPaid(answers[1 - winner]!);
    const paid = await ended(payers[winner]!, answers[winner]!.body.data.id);
    assert.equal(paid.status, 'paid');
    assert.deepEqual(await satBalance(payers[1 - winner]!), { available: 50_000n, reserved: 0n });
    assert.deepEqual(await satBalance(payers[winner]!), { available: 50_000n - 3_100n - BigInt(paid.fee_sat), reserved: 0n });
    assert.equal((await theirInvoiceState(invoice.paymentHash)).amt_paid_msat, '3100000', 'paid once');
  });

  it('an invoice that expired before its send: failed invoice_expired (LND refuses it for good), the reserve released, the hash free again', async () => {
    const org = await fundedOrganization('late payer');
    await worker.stop();
    const invoice = await theirInvoice({ value: '1200', memo: 'expires before it is sent', expiry: '5' });
    const payment = await payCreated(org, { request: invoice.request, max_fee: 10 });
    assert.equal((await satBalance(org)).reserved, 1_210n);
    await new Promise((resolve) => setTimeout(resolve, 5_500));
    await worker.start();
    const failed = await ended(org, payment.id);
    assert.deepEqual([failed.status, failed.failure_reason], ['failed', 'invoice_expired']);
    assert.deepEqual(await satBalance(org), { available: 50_000n, reserved: 0n });
    await assertLedgerReconciles(org.organizationId);
    const claims = await (await testOrm()).em.fork().getConnection().execute('select 1 from lightning_payment_claims where payment_id = ?', [payment.id]);
    assert.equal(claims.length, 0, 'a failed payment releases its claim on the hash');
  });

  it('a CLTV over LND’s limit: the preview finds no route and the payment is refused before anything is reserved; a send is failed cltv_limit_exceeded', async () => {
    const org = await fundedOrganization('cltv payer');
    // LND accepts invoices with a final CLTV delta up to 65535, and pays none whose total time lock exceeds 2016 blocks.
    const invoice = await theirInvoice({ value: '1000', memo: 'too far in the future', cltv_expiry: '2100' });
    const preview = await app.request('POST', '/api/lightning/payments/initiate', { key: org.secret, body: { request: invoice.request } });
    assert.equal(preview.status, 200, preview.text);
    assert.equal(preview.body.route_found, false);
    const refused = await pay(org, { request: invoice.request });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.body.error.code, 'route_not_found');
    assert.deepEqual(await satBalance(org), { available: 50_000n, reserved: 0n });

    // A payment accepted before (another limit, an older node): LND's refusal of its send is final.
    const em = (await testOrm()).em.fork();
    const decoded = decodeBolt11(invoice.request);
    const row = await insertRowUnlessTaken(em, {
      id: randomUUID(), organizationId: org.organizationId, environment: 'sandbox', direction: 'outgoing', reference: randomUUID(), customerId: null,
      paymentHash: decoded.paymentHash, request: invoice.request, destination: decoded.payee, preimage: '', amountMsat: '1000000', maxFeeMsat: null,
      feeLimitMsat: '10000', description: 'too far in the future', expiresAt: new Date(decoded.expiresAt * 1000), createdAt: new Date(),
    });
    const provider = new LndProvider(network.ours.node, committedClaims(await testOrm()));
    assert.deepEqual(await provider.pay(paymentOrder(em.map(LightningInvoice, row!))), { state: 'failed', reason: 'cltv_limit_exceeded' });
  });

  it('a macaroon without permission to send: the payment fails permission_denied and its reserve is released, nothing sent', async () => {
    // What an operator bakes wrongly: everything the preview and invoices need, not offchain:write (SendPaymentV2).
    const baked = await network.ours.node.call<{ macaroon: string }>('POST', '/v1/macaroon', {
      permissions: [
        { entity: 'info', action: 'read' },
        { entity: 'offchain', action: 'read' },
        { entity: 'invoices', action: 'read' },
      ],
    });
    const directory = mkdtempSync(path.join(os.tmpdir(), 'lnd-macaroon-'));
    const macaroonPath = path.join(directory, 'readonly.macaroon');
    writeFileSync(macaroonPath, Buffer.from(baked.macaroon, 'hex'));
    const readOnly = { ...config, TEMPORAL_TASK_QUEUE: `lnd-readonly-${randomUUID()}`, LIGHTNING_LND_SANDBOX_MACAROON_PATH: macaroonPath };
    const readOnlyApp = await startTestApp({ config: readOnly });
    const readOnlyWorker = new RestartableWorker(readOnly.TEMPORAL_TASK_QUEUE, readOnly);
    await readOnlyWorker.start();
    try {
      const org = await fundedOrganization('read-only payer');
      const invoice = await theirInvoice({ value: '1500', memo: 'never sent' });
      const created = await readOnlyApp.request('POST', '/api/lightning/payments', { key: org.secret, body: { request: invoice.request, max_fee: 10, reference: randomUUID() } });
      assert.equal(created.status, 201, created.text);
      const failed = await ended(org, created.body.data.id, 60_000, readOnlyApp);
      assert.deepEqual([failed.status, failed.failure_reason], ['failed', 'permission_denied']);
      assert.deepEqual(await satBalance(org), { available: 50_000n, reserved: 0n });
      assert.equal((await theirInvoiceState(invoice.paymentHash)).state, 'OPEN', 'nothing reached them');
    } finally {
      await readOnlyWorker.stop();
      await readOnlyApp.close();
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it('an invoice behind a private channel, with its route hint: previewed with a route, paid; without max_fee the limit is max(10 sats, 1 %, the estimate)', async () => {
    await network.ours.node.call('POST', '/v1/channels', { node_pubkey: base64(network.theirs.pubkey), local_funding_amount: '300000', private: true });
    await network.mine(6);
    // They put a hint in an invoice once they know our policy for the private channel.
    const invoice = await eventually(
      async () => {
        const added = await theirInvoice({ value: '6000', memo: 'from a private channel', private: true });
        const decoded = await network.ours.node.call<{ route_hints?: { hop_hints: { node_id: string }[] }[] }>('GET', `/v1/payreq/${added.request}`);
        return decoded.route_hints?.some((hint) => hint.hop_hints.some((hop) => hop.node_id === network.ours.pubkey)) ? added : undefined;
      },
      'an invoice of theirs with a route hint through the private channel',
      60_000,
      500,
    );
    const org = await fundedOrganization('private channel payer');
    const preview = await app.request('POST', '/api/lightning/payments/initiate', { key: org.secret, body: { request: invoice.request } });
    assert.equal(preview.status, 200, preview.text);
    assert.equal(preview.body.route_found, true, preview.text);

    const payment = await payCreated(org, { request: invoice.request });
    const stored = await (await testOrm()).em.fork().findOneOrFail(LightningInvoice, { id: payment.id });
    const estimateMsat = BigInt(preview.body.fee_sat) * 1000n;
    const expected = [10_000n, 60_000n, estimateMsat].reduce((a, b) => (a > b ? a : b));
    assert.equal(stored.feeLimitMsat, expected.toString(), '1 % of 6,000 sats is 60 sats, over the 10-sat floor');
    const paid = await ended(org, payment.id);
    assert.equal(paid.status, 'paid', JSON.stringify(paid));
    assert.deepEqual((await theirInvoiceState(invoice.paymentHash)).state, 'SETTLED');
    assert.deepEqual(await satBalance(org), { available: 50_000n - 6_000n - BigInt(paid.fee_sat), reserved: 0n });
  });

  it('an invoice of a node reachable only through a private channel: no route without its hint; previewed with a route and paid with it', async () => {
    const hidden = await startHiddenPayee(network);
    try {
      const added = await hidden.node.call<{ payment_request: string; r_hash: string }>('POST', '/v1/invoices', { value: '2500', memo: 'from behind a private channel', private: true });
      await assert.rejects(network.ours.node.call('GET', `/v1/graph/routes/${hidden.pubkey}/2500`), 'no path to it in the graph');
      const org = await fundedOrganization('hidden payee payer');
      const preview = await app.request('POST', '/api/lightning/payments/initiate', { key: org.secret, body: { request: added.payment_request } });
      assert.equal(preview.status, 200, preview.text);
      assert.equal(preview.body.route_found, true, preview.text);
      const paid = await ended(org, (await payCreated(org, { request: added.payment_request })).id);
      assert.equal(paid.status, 'paid', JSON.stringify(paid));
      const paymentHash = Buffer.from(added.r_hash, 'base64').toString('hex');
      assert.equal((await hidden.node.call<{ state: string }>('GET', `/v1/invoice/${paymentHash}`)).state, 'SETTLED');
      assert.deepEqual(await satBalance(org), { available: 50_000n - 2_500n - BigInt(paid.fee_sat), reserved: 0n });
    } finally {
      await hidden.stop();
    }
  });

  it('an amount no single channel of ours carries, two together do: previewed with a route (the parts LND will send), paid in parts', async () => {
    const spendableSats = async () => {
      const { channels = [] } = await network.ours.node.call<{ channels?: { local_balance: string; local_constraints: { chan_reserve_sat: string } }[] }>('GET', '/v1/channels?active_only=true');
      return channels.map((channel) => BigInt(channel.local_balance) - BigInt(channel.local_constraints.chan_reserve_sat)).sort((a, b) => (a > b ? -1 : 1));
    };
    if ((await spendableSats()).length < 2) {
      await network.ours.node.call('POST', '/v1/channels', { node_pubkey: base64(network.theirs.pubkey), local_funding_amount: '300000' });
      await network.mine(6);
      await eventually(async () => ((await spendableSats()).length === 2 ? true : undefined), 'a second channel of ours to be active', 60_000, 200);
    }
    const [largest, second] = await spendableSats();
    const amount = largest! + second! / 2n;
    const invoice = await theirInvoice({ value: amount.toString(), memo: 'more than any one channel carries' });
    await assert.rejects(network.ours.node.call('GET', `/v1/graph/routes/${network.theirs.pubkey}/${amount}`), /unable to find a path/, 'no single route carries it');

    const org = await fundedOrganization('multi-path payer', 2_000_000);
    const preview = await app.request('POST', '/api/lightning/payments/initiate', { key: org.secret, body: { request: invoice.request } });
    assert.equal(preview.status, 200, preview.text);
    assert.equal(preview.body.route_found, true, preview.text);
    const paid = await ended(org, (await payCreated(org, { request: invoice.request })).id);
    assert.equal(paid.status, 'paid', JSON.stringify(paid));
    const { payments } = await network.ours.node.call<{ payments: { payment_hash: string; htlcs: { status: string }[] }[] }>('GET', '/v1/payments?include_incomplete=true');
    const sent = payments.find((payment) => payment.payment_hash === invoice.paymentHash)!;
    assert.ok(sent.htlcs.filter((htlc) => htlc.status === 'SUCCEEDED').length >= 2, `paid in parts: ${JSON.stringify(sent.htlcs.map((htlc) => htlc.status))}`);
    assert.equal((await theirInvoiceState(invoice.paymentHash)).amt_paid_msat, (amount * 1000n).toString());
    assert.deepEqual(await satBalance(org), { available: 2_000_000n - amount - BigInt(paid.fee_sat), reserved: 0n });
  });

  it('a send that keeps failing (our node down) is held for an operator, listed and counted; lightning:resolve asks the node first, then fails it not_sent', async () => {
    const org = await fundedOrganization('held payer');
    const cliEnv = { ...config, TEMPORAL_ADDRESS: (await localTemporal()).connection.options.address };
    await worker.stop();
    const invoice = await theirInvoice({ value: '1700', memo: 'sent while our node is down' });
    const payment = await payCreated(org, { request: invoice.request, max_fee: 10 });
    await network.ours.kill();
    await worker.start();
    const em = (await testOrm()).em.fork();
    await eventually(async () => ((await em.findOneOrFail(LightningInvoice, { id: payment.id }, { refresh: true })).heldAt ? true : undefined), 'the payment to be held', 60_000, 200);
    await worker.stop();

    // Its owner sees the hold: pending, since when, and why in a word (not the node's address).
    const shown = await app.request('GET', `/api/lightning/payments/${payment.id}`, { key: org.secret });
    assert.equal(shown.status, 200, shown.text);
    const { status, held_at, held_reason } = shown.body.data as Payment;
    assert.deepEqual([status, held_reason], ['pending', 'unreachable']);
    assert.ok(held_at && Date.parse(held_at) <= Date.now(), held_at ?? 'no held_at');
    assert.doesNotMatch(shown.text, /did not answer|127\.0\.0\.1/);
    const listedRecords = await app.request('GET', '/api/lightning/invoices?direction=outgoing&status=pending', { key: org.secret });
    assert.deepEqual(
      (listedRecords.body.data.invoices as { id: string; held_at: string | null; held_reason: string | null }[]).map((record) => [record.id, record.held_at, record.held_reason]),
      [[payment.id, held_at, 'unreachable']],
    );

    const metrics = await app.request('GET', '/metrics');
    assert.match(metrics.text, /lightning_payments_held\{environment="sandbox"\} [1-9]/);
    const listed = JSON.parse((await cli(['lightning:held', '--org', org.organizationId], process.env.DATABASE_URL!, cliEnv)).stdout) as { payments: { id: string; held_reason: string; held_reason_code: string; reserved_sat: string }[] };
    assert.deepEqual(
      listed.payments.map((held) => [held.id, held.reserved_sat, held.held_reason_code]),
      [[payment.id, '1710', 'unreachable']],
    );
    assert.match(listed.payments[0]!.held_reason, /did not answer/);
    assert.equal((await satBalance(org)).reserved, 1_710n, 'held, not refunded');

    // The node unreachable: the operator's command changes nothing.
    await assert.rejects(cli(['lightning:resolve', '--payment', payment.id], process.env.DATABASE_URL!, cliEnv));
    assert.equal((await satBalance(org)).reserved, 1_710n);

    await network.ours.restart();
    const resolved = JSON.parse((await cli(['lightning:resolve', '--payment', payment.id], process.env.DATABASE_URL!, cliEnv)).stdout) as { resolved: boolean; status: string; node_says: string };
    assert.deepEqual(resolved, { payment_id: payment.id, resolved: true, status: 'failed', node_says: 'not_sent' });
    assert.deepEqual(await satBalance(org), { available: 50_000n, reserved: 0n });

    // Its workflow, back, finds it ended and sends nothing.
    await worker.start();
    const failed = await ended(org, payment.id);
    assert.deepEqual([failed.status, failed.failure_reason, failed.held_at, failed.held_reason], ['failed', 'not_sent', null, null], 'an ended payment is no longer held');
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    assert.equal((await theirInvoiceState(invoice.paymentHash)).state, 'OPEN', 'nothing went out');
    await assertLedgerReconciles(org.organizationId);
  });
});
