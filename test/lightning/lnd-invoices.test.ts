import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Event } from '../../src/events/entities';
import { expireDueInvoices } from '../../src/lightning/invoices';
import { LndNode } from '../../src/lightning/lnd';
import { LND_PERMISSIONS, macaroonPermissions } from '../../src/lightning/lnd-macaroon';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { assertLedgerReconciles } from '../support/ledger';
import { cli } from '../support/cli';
import { lndLiveConfig, lndSandboxConfig, startLightningNetworkOrSkip, type LightningNetwork } from '../support/lnd';
import { RestartableWorker } from '../support/worker';

const [LIST_INVOICES, LOOKUP_INVOICE] = ['lnrpc.Lightning/ListInvoices', 'lnrpc.Lightning/LookupInvoice'];
/** The node logs a call as it serves it; the line reaches us a moment after the answer may: counts taken after this include the calls made before. */
const nodeLogCaughtUp = () => new Promise((resolve) => setTimeout(resolve, 500));

interface Invoice {
  id: string;
  request: string;
  payment_hash: string;
}

/**
 * Our LND's invoices as a deployment meets them (two nodes on btcd regtest, ours the sandbox node, its only
 * channel to theirs private): invoices carry hints to that channel, what settled while no worker watched is
 * credited once from the node's stored settle_index (even after the expiry sweep; on a first start, from our
 * own invoices looked up by hash, never the node's whole list), and an organization's
 * payment of another's invoice cancels the node's copy so no outside payer pays it too.
 */
describe('LND invoices: route hints, catching up, internal payments (two nodes on btcd regtest)', function () {
  this.timeout(240_000);
  let network: LightningNetwork;
  let app: TestApp;
  let worker: RestartableWorker;
  let payee: TestOrganization;

  before(async function () {
    this.timeout(300_000);
    network = await startLightningNetworkOrSkip(this, { capacitySat: 1_000_000n, pushSat: 300_000n, private: true });
    const config = { TEMPORAL_TASK_QUEUE: `lnd-invoices-${randomUUID()}`, ...lndSandboxConfig(network.ours) };
    app = await startTestApp({ config });
    // Started by the tests: the first start finds a node whose invoices no worker has watched yet.
    worker = new RestartableWorker(config.TEMPORAL_TASK_QUEUE, config);
    payee = await createTestOrganization('LND payee');
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    await network?.stop();
  });

  const sats = async (org: TestOrganization) => {
    const response = await app.request('GET', '/v1/balances', { key: org.secret });
    const sat = response.body.data.find((balance: { unit: string }) => balance.unit === 'sat') as { available: string; reserved: string } | undefined;
    return { available: BigInt(sat?.available ?? 0), reserved: BigInt(sat?.reserved ?? 0) };
  };
  const newInvoice = async (org: TestOrganization, amount: number, description: string): Promise<Invoice> => {
    const created = await app.request('POST', '/api/lightning/invoices', { key: org.secret, body: { amount, description, expiry: 60, reference: randomUUID() } });
    assert.equal(created.status, 201, created.text);
    return created.body as Invoice;
  };
  const theyPay = (request: string) =>
    network.theirs.node
      .call<{ payment_error?: string }>('POST', '/v1/channels/transactions', { payment_request: request })
      .catch((error: Error) => ({ payment_error: error.message }));
  /** The status column itself (reads present an overdue pending invoice as expired before the sweep writes it). */
  const storedStatus = async (id: string) => (await (await testOrm()).em.fork().getConnection().execute<{ status: string }[]>('select status from lightning_invoices where id = ?', [id]))[0]!.status;
  const paidEvents = async (org: TestOrganization, invoiceId: string) =>
    (await (await testOrm()).em.fork().find(Event, { organization: org.organizationId, type: 'lightning.invoice.paid' })).filter((event) => (event.data as { id: string }).id === invoiceId).length;
  const paid = (org: TestOrganization, id: string, what: string) =>
    eventually(async () => ((await app.request('GET', `/api/lightning/invoices/${id}`, { key: org.secret })).body.data.status === 'paid' ? true : undefined), what, 60_000, 200);
  /** Another organization of ours with 10,000 sandbox sats, and both sides' balances before it pays. */
  const fundedPayer = async (name: string) => {
    const payer = await createTestOrganization(name);
    await app.request('POST', '/v1/sandbox/balances', { key: payer.secret, body: { currency: 'sat', amount: '10000' } });
    return { payer, payerBefore: await sats(payer), payeeBefore: await sats(payee) };
  };
  /** The organization's payment of `invoice` (ours, so over the internal route): its id. */
  const payInternally = async (payer: TestOrganization, invoice: Invoice) => {
    const created = await app.request('POST', '/api/lightning/payments', { key: payer.secret, body: { request: invoice.request, reference: randomUUID() } });
    assert.equal(created.status, 201, created.text);
    return created.body.data.id as string;
  };
  const paymentEnded = (org: TestOrganization, id: string) =>
    eventually(
      async () => {
        const read = (await app.request('GET', `/api/lightning/payments/${id}`, { key: org.secret })).body.data as { status: string; fee_sat: string; failure_reason: string | null };
        return read.status === 'pending' ? undefined : read;
      },
      `payment ${id} to end`,
      60_000,
      200,
    );
  /** The expiry sweep's own batch, with a cutoff past the invoices' expiry: what the Schedule does a minute later. */
  const sweepPastExpiry = async (org: TestOrganization) =>
    (await testOrm()).em.fork().transactional((tx) => expireDueInvoices(tx, { dueBy: new Date(Date.now() + 120_000), limit: 500, organizationId: org.organizationId }));
  /** Pays without the watch noticing, then sweeps it expired: what a node paid while no worker ran, an expiry later, looks like. */
  const paidWhileNobodyWatched = async (invoice: Invoice) => {
    const sent = await theyPay(invoice.request);
    assert.ok(!sent.payment_error, sent.payment_error ?? '');
    assert.equal((await nodeInvoice(invoice.payment_hash)).state, 'SETTLED', 'the node took the payment');
    assert.equal(await sweepPastExpiry(payee), 1, 'the sweep expired it: nothing told the ledger it was paid');
    assert.equal(await storedStatus(invoice.id), 'expired');
  };
  const nodeInvoice = (paymentHash: string) => network.ours.node.call<{ state: string; settle_index: string; amt_paid_msat: string }>('GET', `/v1/invoice/${paymentHash}`);
  const storedSettleIndex = async () =>
    (await (await testOrm()).em.fork().getConnection().execute<{ settle_index: string }[]>("select settle_index from lightning_invoice_cursors where environment = 'sandbox' and node_pubkey = ?", [network.ours.pubkey]))[0]
      ?.settle_index;

  it("a node no worker ever watched is caught up from our invoices, never its whole list: 200 of another application's are not read, one of ours paid and since expired is credited once", async () => {
    const before = await sats(payee);
    // Another application on the same node: 200 invoices, a few of them paid.
    const others: string[] = [];
    for (let i = 0; i < 200; i++) others.push((await network.ours.node.call<{ payment_request: string }>('POST', '/v1/invoices', { value: '10', memo: `another application ${i}` })).payment_request);
    for (const request of others.slice(0, 3)) assert.ok(!(await theyPay(request)).payment_error);
    const invoice = await newInvoice(payee, 1_700, 'paid before any worker ran');
    await paidWhileNobodyWatched(invoice);
    assert.equal(await storedSettleIndex(), undefined, 'no settle_index stored yet');
    const { settle_index: settleIndex } = await nodeInvoice(invoice.payment_hash);
    await nodeLogCaughtUp();
    const [listed, lookedUp] = [network.ours.rpcCalls(LIST_INVOICES), network.ours.rpcCalls(LOOKUP_INVOICE)];

    await worker.start();
    await paid(payee, invoice.id, 'the first watch to look our invoice up on the node and record it');
    await nodeLogCaughtUp();
    assert.equal(network.ours.rpcCalls(LOOKUP_INVOICE) - lookedUp, 1, 'one look-up: our one invoice the ledger did not have paid');
    assert.equal(network.ours.rpcCalls(LIST_INVOICES) - listed, 0, "the node's invoices are never listed");
    assert.deepEqual(await sats(payee), { available: before.available + 1_700n, reserved: 0n });
    assert.equal(await paidEvents(payee, invoice.id), 1, 'one lightning.invoice.paid');
    assert.equal(await storedSettleIndex(), settleIndex, 'its settle_index stored at once: the subscription starts after it');
    await assertLedgerReconciles(payee.organizationId);
  });

  it('our invoices carry a route hint to our private channel, the only way a payer can find our node, and are paid through it', async () => {
    const payer = network.payer!;
    // LND hints at a private channel once it knows its peer for a public node (announced): wait for that on the node itself.
    await eventually(
      async () => {
        const added = await network.ours.node.call<{ payment_request: string }>('POST', '/v1/invoices', { value: '1', private: true });
        const decoded = await network.theirs.node.call<{ route_hints?: unknown[] }>('GET', `/v1/payreq/${added.payment_request}`);
        return decoded.route_hints?.length ? true : undefined;
      },
      'our node to know its private channel well enough to hint at it',
      90_000,
      500,
    );
    const before = await sats(payee);
    const invoice = await newInvoice(payee, 1_100, 'over a private channel');
    const decoded = await network.theirs.node.call<{ route_hints?: { hop_hints: { node_id: string }[] }[] }>('GET', `/v1/payreq/${invoice.request}`);
    const { channels } = await network.ours.node.call<{ channels: { private: boolean }[] }>('GET', '/v1/channels');
    assert.deepEqual(
      channels.map((channel) => channel.private),
      [true],
      'our only channel is private',
    );
    assert.deepEqual(
      decoded.route_hints?.map((hint) => hint.hop_hints.map((hop) => hop.node_id)),
      [[network.theirs.pubkey]],
      'one hint: the last hop from their node over our private channel',
    );
    await assert.rejects(payer.node.call('GET', `/v1/graph/routes/${network.ours.pubkey}/1100`), 'without the hint the payer knows no path to our node');
    const sent = await payer.node.call<{ payment_error?: string }>('POST', '/v1/channels/transactions', { payment_request: invoice.request });
    assert.ok(!sent.payment_error, sent.payment_error ?? '');
    await paid(payee, invoice.id, 'the invoice paid over the private channel to be recorded');
    assert.deepEqual(await sats(payee), { available: before.available + 1_100n, reserved: 0n });
  });

  it('an invoice paid while no worker watched, then expired by the sweep, is credited once when a worker starts: from the stored settle_index', async () => {
    const watched = await newInvoice(payee, 500, 'paid while a worker watched');
    assert.ok(!(await theyPay(watched.request)).payment_error);
    await paid(payee, watched.id, 'the watched invoice to be recorded');
    await eventually(
      async () => ((await storedSettleIndex()) === (await nodeInvoice(watched.payment_hash)).settle_index ? true : undefined),
      'its settle_index to be stored with the settlement',
    );
    const before = await sats(payee);
    await worker.stop();
    const invoice = await newInvoice(payee, 2_200, 'paid while nobody watched');
    await paidWhileNobodyWatched(invoice);

    await worker.start();
    await paid(payee, invoice.id, 'the restarted watch to replay the node settlements after the stored index');
    assert.equal(await storedSettleIndex(), (await nodeInvoice(invoice.payment_hash)).settle_index, 'the cursor moved past it');
    // Another start replays nothing twice.
    await worker.stop();
    await worker.start();
    const another = await newInvoice(payee, 300, 'paid after a second restart');
    assert.ok(!(await theyPay(another.request)).payment_error);
    await paid(payee, another.id, 'the next invoice to be recorded');
    assert.deepEqual(await sats(payee), { available: before.available + 2_200n + 300n, reserved: 0n }, 'credited once each');
    assert.equal(await paidEvents(payee, invoice.id), 1, 'one lightning.invoice.paid');
    await assertLedgerReconciles(payee.organizationId);
  });

  it("an organization's payment of another's invoice cancels the node's invoice first: an outside payer can no longer pay it", async () => {
    const { payer, payerBefore, payeeBefore } = await fundedPayer('LND internal payer');
    const invoice = await newInvoice(payee, 4_000, 'paid by another organization');
    const created = await payInternally(payer, invoice);
    const payment = await paymentEnded(payer, created);
    assert.deepEqual([payment.status, payment.fee_sat], ['paid', '0']);
    assert.equal((await nodeInvoice(invoice.payment_hash)).state, 'CANCELED', "the node's copy is cancelled");

    const outside = await theyPay(invoice.request);
    assert.ok(outside.payment_error, 'the outside payment is refused by our node');
    assert.equal((await nodeInvoice(invoice.payment_hash)).amt_paid_msat, '0', 'our node took nothing from them');
    assert.deepEqual(await sats(payer), { available: payerBefore.available - 4_000n, reserved: 0n });
    assert.deepEqual(await sats(payee), { available: payeeBefore.available + 4_000n, reserved: 0n }, 'credited once');
    await assertLedgerReconciles(payer.organizationId);
    await assertLedgerReconciles(payee.organizationId);
  });

  it('an invoice an outside payer paid on the node first is refused to an organization: its payment fails invoice_already_paid, nothing taken', async () => {
    const { payer, payerBefore, payeeBefore } = await fundedPayer('LND late internal payer');
    const invoice = await newInvoice(payee, 5_000, 'paid from outside first');
    // No worker watches: the ledger has not heard of the outside payment when the organization pays.
    await worker.stop();
    assert.ok(!(await theyPay(invoice.request)).payment_error);
    const created = await payInternally(payer, invoice);
    await worker.start();
    const payment = await paymentEnded(payer, created);
    assert.deepEqual([payment.status, payment.failure_reason], ['failed', 'invoice_already_paid']);
    await paid(payee, invoice.id, 'the outside payment to be recorded');
    assert.deepEqual(await sats(payer), payerBefore, 'nothing taken, nothing left reserved');
    assert.deepEqual(await sats(payee), { available: payeeBefore.available + 5_000n, reserved: 0n }, 'credited once, for the outside payment');
    assert.equal(await paidEvents(payee, invoice.id), 1);
    await assertLedgerReconciles(payer.organizationId);
    await assertLedgerReconciles(payee.organizationId);
  });

  it('a first start with none of ours ever settled on the node subscribes from now: its first settlement looks ours up again, then stores the index', async () => {
    await worker.stop();
    // A node none of whose invoices of ours was settled yet (those recorded paid are not looked up): no cursor.
    await (await testOrm()).em.fork().getConnection().execute("delete from lightning_invoice_cursors where environment = 'sandbox'");
    const open = await newInvoice(payee, 400, 'open when the worker starts');
    await nodeLogCaughtUp();
    const lookedUp = network.ours.rpcCalls(LOOKUP_INVOICE);
    await worker.start();
    await eventually(async () => (network.ours.rpcCalls(LOOKUP_INVOICE) - lookedUp === 2 ? true : undefined), 'both passes of the start to look our open invoice up');
    assert.equal(await storedSettleIndex(), undefined, 'none of ours settled: no index to start from');

    const before = await sats(payee);
    assert.ok(!(await theyPay(open.request)).payment_error);
    await paid(payee, open.id, 'the first settlement the subscription delivers to be recorded');
    await nodeLogCaughtUp();
    assert.equal(network.ours.rpcCalls(LOOKUP_INVOICE) - lookedUp, 3, 'at the start, two passes; at its first settlement, ours looked up again before the cursor moved');
    assert.equal(await storedSettleIndex(), (await nodeInvoice(open.payment_hash)).settle_index, 'the index stored with it');
    assert.deepEqual(await sats(payee), { available: before.available + 400n, reserved: 0n }, 'credited once');
    assert.equal(await paidEvents(payee, open.id), 1);
  });

  describe("live: the node's macaroon and certificate", () => {
    let directory: string;
    let liveApp: TestApp;
    let live: string;
    let macaroonPath: string;

    before(async () => {
      directory = mkdtempSync(path.join(os.tmpdir(), 'lnd-credentials-'));
      macaroonPath = path.join(directory, 'service.macaroon');
      // The operator's first mistake: the admin macaroon configured for live.
      copyFileSync(network.ours.macaroonPath, macaroonPath);
      liveApp = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: `lnd-live-${randomUUID()}`, ...lndLiveConfig(network.ours), LIGHTNING_LND_LIVE_MACAROON_PATH: macaroonPath } });
      live = (await payee.key(['*'], 'live')).secret;
    });
    after(async () => {
      await liveApp?.close();
      rmSync(directory, { recursive: true, force: true });
    });

    const liveInvoice = () => liveApp.request('POST', '/api/lightning/invoices', { key: live, body: { amount: 1_000, description: 'live', reference: randomUUID() } });
    const bake = async (rootKeyId: number) => {
      const { stdout } = await cli(['lnd:bake-macaroon', '--environment', 'live', '--admin-macaroon', network.ours.macaroonPath, '--out', macaroonPath, '--root-key-id', String(rootKeyId)], undefined, lndLiveConfig(network.ours));
      return JSON.parse(stdout) as { permissions: string[]; root_key_id: string };
    };

    it('refuses an admin macaroon (503, reason macaroon_too_broad, no retry hint) and takes the one lnd:bake-macaroon bakes into its place, without a restart', async () => {
      assert.ok(macaroonPermissions(readFileSync(network.ours.macaroonPath))?.includes('onchain:write'), "LND's admin macaroon, as read: it could spend on chain");
      const refused = await liveInvoice();
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.body.error.code, 'lightning_node_unavailable');
      assert.deepEqual(refused.body.error.details, { reason: 'macaroon_too_broad' }, 'no retry hint: waiting does not help, a new macaroon does');
      assert.equal(refused.headers.get('retry-after'), null);
      assert.match(refused.body.error.message, /onchain:write/);

      const baked = await bake(2);
      assert.deepEqual(baked.permissions, [...LND_PERMISSIONS]);
      assert.deepEqual(macaroonPermissions(readFileSync(macaroonPath))?.sort(), [...LND_PERMISSIONS].sort(), 'the file holds exactly those permissions');
      const created = await liveInvoice();
      assert.equal(created.status, 201, created.text);
    });

    it('a macaroon rotated (the old one revoked) and a certificate regenerated while the service runs are used from the next call on', async () => {
      const old = readFileSync(macaroonPath);
      await bake(3);
      await network.ours.node.call('DELETE', '/v1/macaroon/2');
      const withOld = new LndNode({ restUrl: network.ours.restUrl, credentials: () => ({ macaroon: old, tlsCert: readFileSync(network.ours.tlsCertPath) }), network: 'regtest' });
      await assert.rejects(withOld.call('GET', '/v1/getinfo'), /verification failed|cannot get macaroon|root key/i, 'the old macaroon is revoked');
      const afterMacaroon = await liveInvoice();
      assert.equal(afterMacaroon.status, 201, afterMacaroon.text);

      // LND writes a new certificate and key when it starts without them.
      const oldCert = readFileSync(network.ours.tlsCertPath);
      await network.ours.kill();
      rmSync(network.ours.tlsCertPath);
      rmSync(path.join(path.dirname(network.ours.tlsCertPath), 'tls.key'));
      await network.ours.restart();
      assert.notDeepEqual(readFileSync(network.ours.tlsCertPath), oldCert, 'a new certificate');
      const afterCert = await liveInvoice();
      assert.equal(afterCert.status, 201, afterCert.text);
    });
  });
});
