import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { secp256k1 } from '@noble/curves/secp256k1';
import { Event } from '../../src/events/entities';
import { decodeBolt11 } from '../../src/lightning/bolt11';
import { withNodeKey } from '../../src/lightning/node-key';
import { issueSandboxInvoice } from '../../src/lightning/sandbox-network';
import { encodeBolt11 } from '../../src/lightning/bolt11';
import { LightningInvoice } from '../../src/lightning/entities';
import { settleIncomingInvoice } from '../../src/lightning/invoices';
import { eventually } from '../support/eventually';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { assertLedgerReconciles, companyBalanceEntries } from '../support/ledger';
import { recordLiveInvoice } from '../support/live-invoices';
import { createTestWorker } from '../support/worker';
import { lightningInvoiceExpirySweepWorkflow } from '../../workflows';

describe('Lightning API', () => {
  let app: TestApp;
  let worker: Worker;
  let running: Promise<void>;
  const taskQueue = `lightning-api-${randomUUID()}`;

  before(async () => {
    app = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: taskQueue } });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue));
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const satBalance = async (org: TestOrganization, key = org.secret) => {
    const response = await app.request('GET', '/v1/balances', { key });
    const sat = response.body.data.find((balance: any) => balance.unit === 'sat');
    return { available: BigInt(sat.available), reserved: BigInt(sat.reserved) };
  };
  const fund = (org: TestOrganization, amount: number) =>
    app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: { currency: 'sat', amount: String(amount) } });
  const createInvoice = (org: TestOrganization, body: Record<string, unknown> = {}) =>
    app.request('POST', '/api/lightning/invoices', { key: org.secret, body: { amount: 1500, description: 'coffee', reference: randomUUID(), ...body } });
  const remoteInvoice = async (org: TestOrganization, body: Record<string, unknown>) =>
    (await app.request('POST', '/v1/sandbox/lightning/invoices', { key: org.secret, body })).body.request as string;
  const pay = (org: TestOrganization, body: Record<string, unknown>) =>
    app.request('POST', '/api/lightning/payments', { key: org.secret, body: { reference: randomUUID(), ...body } });

  function settled(org: TestOrganization, paymentId: string) {
    return eventually(async () => {
      const response = await app.request('GET', `/api/lightning/payments/${paymentId}`, { key: org.secret });
      return response.body.data.status !== 'pending' ? response.body.data : undefined;
    }, `payment ${paymentId} to settle`, 15_000);
  }

  it('creates a signed testnet invoice (201), returns the original for a repeated reference, gets and lists it', async () => {
    const org = await createTestOrganization();
    const reference = randomUUID();
    const created = await createInvoice(org, { reference, amount: 2100, description: 'two coffees', expiry: 600 });
    assert.equal(created.status, 201);
    const invoice = created.body;
    assert.equal(invoice.object, 'lightning_invoice');
    assert.equal(invoice.amount_sat, '2100');
    assert.equal(invoice.status, 'pending');
    assert.equal(invoice.workflow_id, null, 'no workflow per invoice: the expiry sweep expires it');
    assert.match(invoice.payment_hash, /^[0-9a-f]{64}$/);
    assert.match(invoice.expires_at, /^\d{4}-\d\d-\d\dT/);
    const decoded = decodeBolt11(invoice.request);
    assert.equal(Date.parse(invoice.expires_at), decoded.expiresAt * 1000);
    assert.ok(Date.parse(invoice.expires_at) - Date.parse(invoice.created_at) > 599_000);
    assert.ok(Date.parse(invoice.expires_at) - Date.parse(invoice.created_at) <= 600_000);
    assert.ok(invoice.request.startsWith('lntb21u1'));
    assert.equal(decoded.paymentHash, invoice.payment_hash);
    assert.equal(decoded.description, 'two coffees');
    assert.equal(decoded.expirySeconds, 600);

    // Signed by the sandbox node key, which is stored encrypted and opens to the payee's key.
    const nodeKey = await withNodeKey((await testOrm()).em.fork(), app.deps.keys, 'sandbox', (privateKey, publicKey) => ({
      derived: Buffer.from(secp256k1.getPublicKey(privateKey, true)).toString('hex'),
      publicKey,
    }));
    assert.equal(nodeKey.publicKey, decoded.payee);
    assert.equal(nodeKey.derived, decoded.payee);

    const readOnly = await org.key(['lightning:read']);
    const forbidden = await app.request('POST', '/api/lightning/invoices', { key: readOnly.secret, body: { amount: 1, description: 'x', reference: randomUUID() } });
    assert.equal(forbidden.status, 403);

    const repeat = await createInvoice(org, { reference, amount: 2100, description: 'two coffees', expiry: 600 });
    assert.equal(repeat.status, 201);
    assert.equal(repeat.body.id, invoice.id);
    assert.equal(repeat.body.request, invoice.request);

    const got = await app.request('GET', `/api/lightning/invoices/${invoice.id}`, { key: org.secret });
    assert.equal(got.status, 200);
    assert.equal(got.body.success, true);
    assert.ok(got.body.metadata.request_id);
    assert.equal(got.body.data.expires_at, String(Date.parse(invoice.expires_at) / 1000));
    assert.equal(got.body.data.preimage, '');
    assert.equal(got.body.data.updated_at, '');
    assert.equal(got.body.data.fee_sat, '0');
    assert.equal(got.body.data.amount_msat, '2100000');
    assert.equal(got.body.data.direction, 'incoming');
    assert.equal(got.body.data.company_id, org.organizationId);

    await createInvoice(org);
    await createInvoice(org);
    const page = await app.request('GET', '/api/lightning/invoices?page=2&page_size=2&direction=incoming&status=pending', { key: org.secret });
    assert.equal(page.status, 200);
    assert.equal(page.body.data.total_count, '3');
    assert.equal(page.body.data.page, 2);
    assert.equal(page.body.data.invoices.length, 1);
    assert.equal(page.body.data.invoices[0].id, invoice.id, 'newest first: the first invoice is last');
    assert.equal((await app.request('GET', '/api/lightning/invoices?page_size=101', { key: org.secret })).status, 400);

    const other = await createTestOrganization();
    assert.equal((await app.request('GET', `/api/lightning/invoices/${invoice.id}`, { key: other.secret })).status, 404);
    assert.equal((await app.request('GET', '/api/lightning/invoices/not-a-uuid', { key: org.secret })).status, 404);
    assert.equal((await createInvoice(org, { amount: 20_000_001 })).status, 400);
    assert.equal((await createInvoice(org, { amount: 0 })).status, 400);
  });

  it('decodes a payment request; an invalid one is a 400 that says what is wrong', async () => {
    const org = await createTestOrganization();
    const { body: invoice } = await createInvoice(org, { amount: 777, description: 'decode me' });
    const decoded = await app.request('POST', '/api/lightning/decode', { key: org.secret, body: { request: invoice.request } });
    assert.equal(decoded.status, 200);
    assert.equal(decoded.body.payment_hash, invoice.payment_hash);
    assert.equal(decoded.body.amount_sat, 777);
    assert.equal(decoded.body.amount_msat, 777_000);
    assert.equal(decoded.body.description, 'decode me');
    assert.equal(decoded.body.expires_at, Date.parse(invoice.expires_at) / 1000);
    assert.equal(decoded.body.is_expired, false);
    assert.match(decoded.body.destination, /^0[23][0-9a-f]{64}$/);
    // The document's pattern admits what the service issues, in either case, and its example decodes.
    const documented = (await app.request('GET', '/openapi.json')).body.paths['/api/lightning/decode'].post.requestBody.content['application/json'].schema.properties.request;
    assert.match(invoice.request, new RegExp(documented.pattern));
    assert.match(invoice.request.toUpperCase(), new RegExp(documented.pattern));
    assert.equal((await app.request('POST', '/api/lightning/decode', { key: org.secret, body: { request: invoice.request.toUpperCase() } })).status, 200);
    const example = await app.request('POST', '/api/lightning/decode', { key: org.secret, body: { request: documented.example } });
    assert.deepEqual([example.status, example.body.network, example.body.amount_sat, example.body.description], [200, 'testnet', 2100, 'coffee']);

    const broken = invoice.request.slice(0, -1) + (invoice.request.endsWith('q') ? 'p' : 'q');
    const bad = await app.request('POST', '/api/lightning/decode', { key: org.secret, body: { request: broken } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_payment_request');
    assert.equal(bad.body.error.param, 'request');
    assert.match(bad.body.error.message, /checksum/);
  });

  it('a remote payer pays our invoice: paid with its preimage, the Lightning balance rises', async () => {
    const org = await createTestOrganization();
    const { body: invoice } = await createInvoice(org, { amount: 1234 });
    const paid = await app.request('POST', `/v1/sandbox/lightning/invoices/${invoice.id}/pay`, { key: org.secret });
    assert.equal(paid.status, 200);
    assert.equal(paid.body.data.status, 'paid');
    assert.equal(createHash('sha256').update(Buffer.from(paid.body.data.preimage, 'hex')).digest('hex'), invoice.payment_hash);
    assert.notEqual(paid.body.data.updated_at, '');
    assert.deepEqual(await satBalance(org), { available: 1234n, reserved: 0n });
    const again = await app.request('POST', `/v1/sandbox/lightning/invoices/${invoice.id}/pay`, { key: org.secret });
    assert.equal(again.status, 409);
    const events = await (await testOrm()).em.fork().find(Event, { organization: org.organizationId, type: 'lightning.invoice.paid' });
    assert.deepEqual(events.map((event) => [event.data.id, event.data.status]), [[invoice.id, 'paid']]);
    assert.deepEqual(await satBalance(org), { available: 1234n, reserved: 0n });
    await assertLedgerReconciles(org.organizationId);
  });

  it('one organization pays another over the internal route: same preimage, exact balances', async () => {
    const payee = await createTestOrganization('Payee');
    const payer = await createTestOrganization('Payer');
    await fund(payer, 10_000);
    const { body: invoice } = await createInvoice(payee, { amount: 2500 });

    const preview = await app.request('POST', '/api/lightning/payments/initiate', { key: payer.secret, body: { request: invoice.request } });
    assert.equal(preview.status, 200);
    assert.deepEqual(
      { amount: preview.body.amount_sat, fee: preview.body.fee_sat, total: preview.body.total_sat, route: preview.body.route_found },
      { amount: '2500', fee: '0', total: '2500', route: true },
    );

    const created = await pay(payer, { request: invoice.request });
    assert.equal(created.status, 201);
    assert.equal(created.body.success, true);
    assert.equal(created.body.data.workflow_id, `lightning-payment-${created.body.data.id}`);
    const payment = await settled(payer, created.body.data.id);
    assert.equal(payment.status, 'paid');
    assert.equal(payment.fee_sat, '0');
    const payeeInvoice = (await app.request('GET', `/api/lightning/invoices/${invoice.id}`, { key: payee.secret })).body.data;
    assert.equal(payeeInvoice.status, 'paid');
    assert.equal(payeeInvoice.preimage, payment.preimage);
    assert.deepEqual(await satBalance(payer), { available: 7_500n, reserved: 0n });
    assert.deepEqual(await satBalance(payee), { available: 2_500n, reserved: 0n });

    const outgoing = await app.request('GET', '/api/lightning/invoices?direction=outgoing', { key: payer.secret });
    assert.equal(outgoing.body.data.total_count, '1');
    assert.equal(outgoing.body.data.invoices[0].preimage, payment.preimage);
    assert.equal(outgoing.body.data.invoices[0].workflow_id, `lightning-payment-${payment.id}`);
    await assertLedgerReconciles(payer.organizationId);
    await assertLedgerReconciles(payee.organizationId);
  });

  it('an invoice past its expiry is expired at once: reads say so, payment is refused, and the sweep records it once', async () => {
    const payee = await createTestOrganization('Payee');
    const payer = await createTestOrganization('Payer');
    await fund(payer, 10_000);
    const { body: invoice } = await createInvoice(payee, { amount: 700 });
    // Its deadline passes (the shortest expiry is a minute): the sweep has not run yet.
    const expiresAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 1_000);
    const em = (await testOrm()).em.fork();
    await em.nativeUpdate(LightningInvoice, { id: invoice.id }, { expiresAt });
    assert.equal((await em.findOneOrFail(LightningInvoice, { id: invoice.id })).status, 'pending', 'not swept yet');

    const read = async () => (await app.request('GET', `/api/lightning/invoices/${invoice.id}`, { key: payee.secret })).body.data;
    const before = await read();
    assert.equal(before.status, 'expired');
    assert.equal(before.updated_at, expiresAt.toISOString(), 'what the sweep will write');
    const listed = async (status: string) =>
      (await app.request('GET', `/api/lightning/invoices?direction=incoming&status=${status}`, { key: payee.secret })).body.data.invoices.map((record: any) => record.id);
    assert.deepEqual(await listed('expired'), [invoice.id]);
    assert.deepEqual(await listed('pending'), []);

    const helper = await app.request('POST', `/v1/sandbox/lightning/invoices/${invoice.id}/pay`, { key: payee.secret });
    assert.equal(helper.status, 409);
    assert.equal(helper.body.error.code, 'invoice_expired');
    // The request itself still says it is valid for an hour: the internal route refuses it at settlement.
    const paid = await settled(payer, (await pay(payer, { request: invoice.request })).body.data.id);
    assert.equal(paid.status, 'failed');
    assert.equal(paid.failure_reason, 'invoice_expired');
    assert.deepEqual(await satBalance(payer), { available: 10_000n, reserved: 0n });
    assert.deepEqual(await satBalance(payee), { available: 0n, reserved: 0n });

    const result = await (await localTemporal()).client.workflow.execute(lightningInvoiceExpirySweepWorkflow, {
      taskQueue,
      workflowId: `expiry-sweep-${randomUUID()}`,
      args: [{ batchSize: 500, organizationId: payee.organizationId }],
    });
    assert.deepEqual([result.expired, result.complete], [1, true]);
    assert.equal((await em.fork().findOneOrFail(LightningInvoice, { id: invoice.id })).status, 'expired');
    assert.deepEqual(await read(), before, 'the read is the same before and after the sweep');
    const events = await em.fork().find(Event, { organization: payee.organizationId, type: { $like: 'lightning.invoice.%' } });
    assert.deepEqual(events.map((event) => [event.type, event.data.id, event.data.status]), [['lightning.invoice.expired', invoice.id, 'expired']]);
    await assertLedgerReconciles(payer.organizationId);
    await assertLedgerReconciles(payee.organizationId);
  });

  it('pays a remote node with the sandbox fee model; a failing node releases the whole reserve', async () => {
    const org = await createTestOrganization();
    await fund(org, 100_000);
    const ok = await pay(org, { request: await remoteInvoice(org, { node: 'ok', amount: 50_000 }) });
    assert.equal(ok.status, 201);
    const paid = await settled(org, ok.body.data.id);
    assert.equal(paid.status, 'paid');
    assert.equal(paid.fee_sat, '51', '1 sat + 1000 ppm of 50,000 sats');
    assert.match(paid.preimage, /^[0-9a-f]{64}$/);
    assert.equal(createHash('sha256').update(Buffer.from(paid.preimage, 'hex')).digest('hex'), paid.payment_hash);
    assert.deepEqual(await satBalance(org), { available: 100_000n - 50_051n, reserved: 0n });

    const fail = await pay(org, { request: await remoteInvoice(org, { node: 'fail', amount: 1_000 }) });
    const failed = await settled(org, fail.body.data.id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.preimage, '');
    assert.deepEqual(await satBalance(org), { available: 100_000n - 50_051n, reserved: 0n });
    await assertLedgerReconciles(org.organizationId);
  });

  it('refuses before sending: max_fee, no route, expired, amountless without amount, insufficient funds', async () => {
    const org = await createTestOrganization();
    await fund(org, 5_000);
    const request = await remoteInvoice(org, { node: 'ok', amount: 3_000 });
    const tooDear = await pay(org, { request, max_fee: 3 });
    assert.equal(tooDear.status, 400);
    assert.equal(tooDear.body.error.code, 'max_fee_exceeded');

    const unroutable = await remoteInvoice(org, { node: 'unroutable', amount: 100 });
    const preview = await app.request('POST', '/api/lightning/payments/initiate', { key: org.secret, body: { request: unroutable } });
    assert.equal(preview.body.route_found, false);
    assert.equal((await pay(org, { request: unroutable })).body.error.code, 'route_not_found');

    // Issued by the sandbox node a minute ago with a 1 s expiry: expired, without the test waiting for it.
    const expired = issueSandboxInvoice({ node: 'ok', amountSat: 100, description: 'expired', expirySeconds: 1, now: new Date(Date.now() - 60_000) }).request;
    const expiredPay = await pay(org, { request: expired });
    assert.equal(expiredPay.status, 400);
    assert.equal(expiredPay.body.error.code, 'invoice_expired');

    const amountless = await remoteInvoice(org, { node: 'ok' });
    const noAmount = await pay(org, { request: amountless });
    assert.equal(noAmount.status, 400);
    assert.equal(noAmount.body.error.code, 'validation_failed');
    assert.equal(noAmount.body.error.param, 'amount');

    const broke = await pay(org, { request: await remoteInvoice(org, { node: 'ok', amount: 4_999 }) });
    assert.equal(broke.status, 400);
    assert.equal(broke.body.error.code, 'insufficient_funds');
    assert.deepEqual(await satBalance(org), { available: 5_000n, reserved: 0n }, 'nothing was reserved or sent');

    const withAmount = await pay(org, { request: amountless, amount: 10 });
    assert.equal((await settled(org, withAmount.body.data.id)).amount_sat, '10');
    await assertLedgerReconciles(org.organizationId);
  });

  it('50 concurrent payments with one reference debit once and all return the original', async () => {
    const org = await createTestOrganization();
    await fund(org, 10_000);
    const request = await remoteInvoice(org, { node: 'ok', amount: 1_000 });
    const reference = randomUUID();
    const responses = await Promise.all(Array.from({ length: 50 }, () => pay(org, { request, reference })));
    assert.deepEqual(new Set(responses.map((response) => response.status)), new Set([201]));
    const ids = new Set(responses.map((response) => response.body.data.id));
    assert.equal(ids.size, 1);
    const payment = await settled(org, [...ids][0] as string);
    assert.equal(payment.status, 'paid');
    assert.deepEqual(await satBalance(org), { available: 10_000n - 1_000n - 2n, reserved: 0n });
    const later = await pay(org, { request, reference });
    assert.equal(later.body.data.id, payment.id);
    assert.equal(later.body.data.status, 'paid');
    await assertLedgerReconciles(org.organizationId);
  });

  it('20 concurrent payments of one invoice under different references: one payment, one debit', async () => {
    const org = await createTestOrganization();
    await fund(org, 100_000);
    const request = await remoteInvoice(org, { node: 'ok', amount: 1_000 });
    const responses = await Promise.all(Array.from({ length: 20 }, () => pay(org, { request })));
    const created = responses.filter((response) => response.status === 201);
    assert.equal(created.length, 1, responses.map((response) => response.status).join(' '));
    const refused = responses.filter((response) => response.status !== 201);
    assert.deepEqual(new Set(refused.map((response) => `${response.status} ${response.body.error.code}`)), new Set(['409 invoice_already_paid']));
    assert.ok(refused.every((response) => response.body.error.details.payment_id === created[0]!.body.data.id));
    assert.equal((await settled(org, created[0]!.body.data.id)).status, 'paid');
    const entries = await companyBalanceEntries(org.organizationId, { kinds: ['reserve', 'capture'] });
    assert.deepEqual(entries.map((entry) => `${entry.kind} ${entry.amount}`).sort(), ['capture 1002', 'reserve 1002']);
    assert.deepEqual(await satBalance(org), { available: 100_000n - 1_002n, reserved: 0n });
    const outgoing = await app.request('GET', '/api/lightning/invoices?direction=outgoing', { key: org.secret });
    assert.equal(outgoing.body.data.total_count, '1');
    await assertLedgerReconciles(org.organizationId);
  });

  it('20 concurrent payments under different references against a balance that covers 10: exactly 10 succeed, to the sat', async () => {
    const org = await createTestOrganization();
    // Each reserves 1,000 sats + a 2-sat fee estimate and pays exactly that.
    await fund(org, 10 * 1_002);
    const requests = await Promise.all(Array.from({ length: 20 }, () => remoteInvoice(org, { node: 'ok', amount: 1_000 })));
    const responses = await Promise.all(requests.map((request) => pay(org, { request })));
    const created = responses.filter((response) => response.status === 201);
    assert.equal(created.length, 10, responses.map((response) => response.status).join(' '));
    assert.ok(responses.filter((response) => response.status !== 201).every((response) => response.status === 400 && response.body.error.code === 'insufficient_funds'));
    for (const response of created) assert.equal((await settled(org, response.body.data.id)).status, 'paid');
    assert.deepEqual(await satBalance(org), { available: 0n, reserved: 0n });
    await assertLedgerReconciles(org.organizationId);
  });

  it('a fee under max_fee: reserve amount + max_fee, capture amount + actual fee, release the rest, entry by entry', async () => {
    const org = await createTestOrganization();
    await fund(org, 5_000);
    const created = await pay(org, { request: await remoteInvoice(org, { node: 'ok', amount: 3_000 }), max_fee: 10 });
    assert.equal(created.status, 201);
    const payment = await settled(org, created.body.data.id);
    assert.equal(payment.status, 'paid');
    assert.equal(payment.fee_sat, '4', '1 sat + 1000 ppm of 3,000 sats');
    const entries = await companyBalanceEntries(org.organizationId, { referenceId: payment.id });
    const byKind = Object.fromEntries(entries.map((entry) => [entry.kind, entry.amount]));
    assert.equal(entries.length, 3);
    assert.deepEqual(byKind, { reserve: '3010', capture: '3004', release: '6' });
    assert.deepEqual(await satBalance(org), { available: 5_000n - 3_004n, reserved: 0n });
    await assertLedgerReconciles(org.organizationId);
  });

  it('sandbox helpers answer 404 to live keys; live with no LND configured is 503 lightning_node_unavailable', async () => {
    const org = await createTestOrganization('Live', 'live');
    const response = await app.request('POST', '/v1/sandbox/lightning/invoices', { key: org.secret, body: { node: 'ok', amount: 10 } });
    assert.equal(response.status, 404);
    const live = await createInvoice(org, { amount: 10 });
    assert.equal(live.status, 503, live.text);
    assert.equal(live.body.error.code, 'lightning_node_unavailable', 'never an invoice no node can be paid at');
    assert.ok((await recordLiveInvoice(app, org.organizationId, { amountSat: 10 })).request.startsWith('lnbc100n1'), 'live invoices are mainnet');
  });

  it('sandbox and live are two worlds: each key sees only its environment, and the sandbox helper cannot pay a live invoice', async () => {
    const org = await createTestOrganization('Two worlds');
    const live = await org.key(['*'], 'live');
    await fund(org, 10_000);
    const reference = randomUUID();
    const sandboxInvoice = (await createInvoice(org, { reference, amount: 1_000 })).body;
    // A reference is unique within one environment only.
    const liveInvoice = await recordLiveInvoice(app, org.organizationId, { amountSat: 2_000, description: 'live coffee', reference });
    assert.notEqual(liveInvoice.id, sandboxInvoice.id);
    assert.ok(sandboxInvoice.request.startsWith('lntb') && liveInvoice.request.startsWith('lnbc'));
    const sandboxPayment = (await pay(org, { request: await remoteInvoice(org, { node: 'ok', amount: 500 }) })).body.data;
    assert.equal((await settled(org, sandboxPayment.id)).status, 'paid');

    // The other environment's id is 404 resource_missing, as another organization's is; lists hold only their own.
    for (const [key, id] of [[live.secret, sandboxInvoice.id], [org.secret, liveInvoice.id], [live.secret, sandboxPayment.id]] as const) {
      const got = await app.request('GET', `/api/lightning/invoices/${id}`, { key });
      assert.equal(got.status, 404);
      assert.equal(got.body.error.code, 'resource_missing');
    }
    assert.equal((await app.request('GET', `/api/lightning/payments/${sandboxPayment.id}`, { key: live.secret })).status, 404);
    assert.equal((await app.request('GET', `/api/lightning/payments/${sandboxPayment.id}`, { key: org.secret })).status, 200);
    const listed = async (key: string) =>
      ((await app.request('GET', '/api/lightning/invoices?page_size=100', { key })).body.data.invoices as { id: string }[]).map((record) => record.id).sort();
    assert.deepEqual(await listed(live.secret), [liveInvoice.id]);
    assert.deepEqual(await listed(org.secret), [sandboxInvoice.id, sandboxPayment.id].sort());

    // The sandbox pay helper finds only sandbox invoices: a live id is 404 and nothing moves.
    const liveBefore = await satBalance(org, live.secret);
    const helper = await app.request('POST', `/v1/sandbox/lightning/invoices/${liveInvoice.id}/pay`, { key: org.secret });
    assert.equal(helper.status, 404);
    assert.equal(helper.body.error.code, 'resource_missing');
    assert.equal((await app.request('POST', `/v1/sandbox/lightning/invoices/${liveInvoice.id}/pay`, { key: live.secret })).status, 404, 'sandbox helpers answer 404 to live keys');
    // Nor does a settlement in the sandbox find the live invoice by its payment hash (the internal route's lookup).
    const em = (await testOrm()).em.fork();
    const crossSettle = await em.transactional((tx) =>
      settleIncomingInvoice(tx, { paymentHash: liveInvoice.payment_hash, environment: 'sandbox', amountMsat: 2_000_000n, paidByPaymentId: null }),
    );
    assert.deepEqual(crossSettle, { outcome: { state: 'failed', reason: 'incorrect_or_unknown_payment_details' } });
    const liveRecord = (await app.request('GET', `/api/lightning/invoices/${liveInvoice.id}`, { key: live.secret })).body.data;
    assert.equal(liveRecord.status, 'pending');
    assert.deepEqual(await satBalance(org, live.secret), liveBefore);
    assert.deepEqual(liveBefore, { available: 0n, reserved: 0n });
    assert.equal(await em.count(Event, { organization: org.organizationId, type: 'lightning.invoice.paid' }), 0);

    // Paying a live invoice from the sandbox is refused (lntb vs lnbc); a live key pays nothing without a live node.
    const crossPay = await pay(org, { request: liveInvoice.request });
    assert.equal(crossPay.status, 400);
    assert.equal(crossPay.body.error.code, 'invalid_payment_request');
    const liveToSandbox = await app.request('POST', '/api/lightning/payments', { key: live.secret, body: { request: sandboxInvoice.request, reference: randomUUID() } });
    assert.equal(liveToSandbox.status, 503);
    assert.equal(liveToSandbox.body.error.code, 'lightning_node_unavailable');

    // The sandbox helper still pays the sandbox invoice, crediting the sandbox balance only.
    assert.equal((await app.request('POST', `/v1/sandbox/lightning/invoices/${sandboxInvoice.id}/pay`, { key: org.secret })).status, 200);
    assert.deepEqual(await satBalance(org), { available: 10_000n - 502n + 1_000n, reserved: 0n });
    assert.deepEqual(await satBalance(org, live.secret), { available: 0n, reserved: 0n });
    await assertLedgerReconciles(org.organizationId, 'sandbox');
    await assertLedgerReconciles(org.organizationId, 'live');
  });

  it('amount and max_fee are bounded, and no input reaches a 500: each is a 400 naming its param', async () => {
    const org = await createTestOrganization();
    await fund(org, 10_000);
    const amountless = await remoteInvoice(org, { node: 'ok' });
    const cases: [Record<string, unknown>, string][] = [
      [{ request: amountless, amount: 20_000_001 }, 'amount'],
      [{ request: amountless, amount: 1e30 }, 'amount'],
      [{ request: amountless, amount: '100' }, 'amount'],
      [{ request: amountless, amount: '123456789012345678901234567' }, 'amount'],
      [{ request: amountless, amount: -5 }, 'amount'],
      [{ request: amountless, amount: 1.5 }, 'amount'],
      [{ request: amountless, amount: 10, max_fee: 20_000_001 }, 'max_fee'],
      [{ request: amountless, amount: 10, max_fee: 1e300 }, 'max_fee'],
      [{ request: amountless, amount: 10, max_fee: '5' }, 'max_fee'],
      [{ request: amountless, amount: 10, max_fee: -1 }, 'max_fee'],
      [{ request: 12345, amount: 10 }, 'request'],
    ];
    for (const [body, param] of cases) {
      const response = await pay(org, body);
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.equal(response.body.error.code, 'validation_failed');
      assert.equal(response.body.error.param, param, JSON.stringify(body));
      const preview = await app.request('POST', '/api/lightning/payments/initiate', { key: org.secret, body: { request: body.request, amount: body.amount } });
      if (param !== 'max_fee') assert.equal(preview.status, 400, `preview ${JSON.stringify(body)}`);
    }
    for (const body of [{ amount: '100' }, { amount: 1e25 }, { amount: -1 }, { expiry: 1e20 }, { expiry: '600' }, { customer_id: 'not-a-uuid' }]) {
      const response = await createInvoice(org, body);
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.equal(response.body.error.param, Object.keys(body)[0]);
    }
    assert.equal((await app.request('POST', '/api/lightning/decode', { key: org.secret, body: { request: 7 } })).status, 400);
    assert.equal((await app.request('GET', '/api/lightning/invoices?page=99999999999999999999999', { key: org.secret })).status, 400);

    // A validly signed invoice may say anything: an amount over the cap, an expiry past any date, a NUL in its description.
    const foreignKey = secp256k1.utils.randomPrivateKey();
    const foreign = (fields: { amountMsat: bigint | null; expirySeconds: number }) =>
      encodeBolt11(
        { network: 'testnet', timestamp: Math.floor(Date.now() / 1000), paymentHash: randomBytes(32), paymentSecret: randomBytes(32), description: 'foreign', minFinalCltvExpiry: 40, ...fields },
        foreignKey,
      );
    const huge = foreign({ amountMsat: 10n ** 30n, expirySeconds: 3600 });
    const decoded = await app.request('POST', '/api/lightning/decode', { key: org.secret, body: { request: huge } });
    assert.equal(decoded.status, 200, 'decoding moves nothing: any amount is shown');
    for (const [path, body] of [['/api/lightning/payments/initiate', { request: huge }], ['/api/lightning/payments', { request: huge, reference: randomUUID() }]] as const) {
      const response = await app.request('POST', path, { key: org.secret, body });
      assert.equal(response.status, 400, path);
      assert.equal(response.body.error.code, 'amount_too_large');
      assert.equal(response.body.error.param, 'request');
    }
    const forever = await pay(org, { request: foreign({ amountMsat: 1_000n, expirySeconds: Number.MAX_SAFE_INTEGER }) });
    assert.equal(forever.status, 400);
    assert.equal(forever.body.error.param, 'request');
    const withNul = issueSandboxInvoice({ node: 'ok', amountSat: 100, description: 'nul\u0000inside', expirySeconds: 600, now: new Date() }).request;
    const nulPaid = await pay(org, { request: withNul });
    assert.equal(nulPaid.status, 201);
    assert.equal((await settled(org, nulPaid.body.data.id)).status, 'paid');
    assert.deepEqual(await satBalance(org), { available: 10_000n - 102n, reserved: 0n });
    await assertLedgerReconciles(org.organizationId);
  });

  it('a reference reused with other parameters is 409 idempotency_key_reused and moves nothing; the same parameters return the original', async () => {
    const org = await createTestOrganization();
    await fund(org, 10_000);
    const invoiceBody = { reference: randomUUID(), amount: 1_500, description: 'coffee', expiry: 900 };
    const original = await createInvoice(org, invoiceBody);
    assert.equal(original.status, 201);
    for (const change of [{ amount: 1_501 }, { description: 'tea' }, { expiry: 901 }, {}, { customer_id: randomUUID() }]) {
      // {} omits expiry: the default (a day), not the 900 s first given.
      const body = Object.keys(change).length === 0 ? { reference: invoiceBody.reference, amount: 1_500, description: 'coffee' } : { ...invoiceBody, ...change };
      const reused = await app.request('POST', '/api/lightning/invoices', { key: org.secret, body });
      assert.equal(reused.status, 409, JSON.stringify(change));
      assert.equal(reused.body.error.code, 'idempotency_key_reused');
      assert.equal(reused.body.error.param, Object.keys(change)[0] ?? 'expiry');
    }
    assert.equal((await createInvoice(org, invoiceBody)).body.id, original.body.id);

    const request = await remoteInvoice(org, { node: 'ok', amount: 1_000 });
    const amountless = await remoteInvoice(org, { node: 'ok' });
    const paymentBody = { reference: randomUUID(), request, max_fee: 10 };
    const first = await pay(org, paymentBody);
    assert.equal(first.status, 201);
    const other = await remoteInvoice(org, { node: 'ok', amount: 1_000 });
    const changes: [Record<string, unknown>, string][] = [
      [{ request: other }, 'request'],
      [{ max_fee: 11 }, 'max_fee'],
      [{ max_fee: undefined }, 'max_fee'],
      [{ amount: 999 }, 'amount'],
      [{ customer_id: randomUUID() }, 'customer_id'],
    ];
    for (const [change, param] of changes) {
      const reused = await pay(org, { ...paymentBody, ...change });
      assert.equal(reused.status, 409, JSON.stringify(change));
      assert.equal(reused.body.error.code, 'idempotency_key_reused');
      assert.equal(reused.body.error.param, param);
    }
    // The same parameters, however the request is cased, and the invoice's own amount given explicitly: the original.
    for (const repeat of [paymentBody, { ...paymentBody, request: request.toUpperCase() }, { ...paymentBody, amount: 1_000 }]) {
      const again = await pay(org, repeat);
      assert.equal(again.status, 201);
      assert.equal(again.body.data.id, first.body.data.id);
    }
    assert.equal((await settled(org, first.body.data.id)).status, 'paid');

    // An any-amount invoice: the amount is part of the payment.
    const anyBody = { reference: randomUUID(), request: amountless, amount: 300 };
    const anyFirst = await pay(org, anyBody);
    assert.equal(anyFirst.status, 201);
    assert.equal((await pay(org, { ...anyBody, amount: 301 })).body.error.code, 'idempotency_key_reused');
    assert.equal((await pay(org, { ...anyBody, amount: undefined })).body.error.code, 'idempotency_key_reused');
    assert.equal((await pay(org, anyBody)).body.data.id, anyFirst.body.data.id);
    assert.equal((await settled(org, anyFirst.body.data.id)).status, 'paid');

    // Concurrently, half with another max_fee: one payment; the winner's parameters return it, the others are 409.
    const raced = { reference: randomUUID(), request: await remoteInvoice(org, { node: 'ok', amount: 2_000 }) };
    const responses = await Promise.all(Array.from({ length: 20 }, (_, index) => pay(org, { ...raced, max_fee: index % 2 === 0 ? 10 : 20 })));
    const won = responses.filter((response) => response.status === 201);
    assert.equal(new Set(won.map((response) => response.body.data.id)).size, 1);
    assert.equal(won.length, 10, responses.map((response) => response.status).join(' '));
    assert.ok(responses.filter((response) => response.status !== 201).every((response) => response.status === 409 && response.body.error.code === 'idempotency_key_reused'));
    assert.equal((await settled(org, won[0]!.body.data.id)).status, 'paid');

    const em = (await testOrm()).em.fork();
    const reserves = await companyBalanceEntries(org.organizationId, { kinds: ['reserve'] });
    assert.equal(reserves.length, 3, 'one reserve per payment');
    assert.deepEqual(reserves.map((entry) => entry.amount).filter((amount) => amount !== '2010' && amount !== '2020').sort(), ['1010', '302']);
    assert.equal(await em.count(LightningInvoice, { organization: org.organizationId, direction: 'outgoing' }), 3);
    assert.deepEqual(await satBalance(org), { available: 10_000n - 1_002n - 302n - 2_003n, reserved: 0n });
    await assertLedgerReconciles(org.organizationId);
  });
});
