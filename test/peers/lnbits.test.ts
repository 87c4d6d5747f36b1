import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { withNodeKey } from '../../src/lightning/node-key';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { testOrm } from '../support/environment';
import { startLnbitsOrSkip, type Lnbits } from '../support/lnbits';
import { bodyOf, typedApi, type TypedApi } from '../support/typed-api';

/**
 * LNbits 1.6.2, the lightning-invoices benchmark's peer, against the real app: an invoice made by each is
 * decoded by the other to the same amount, payment hash, description, expiry and payee (the signer's key
 * each recovers from the signature). The benchmark measures both only once this holds.
 */
describe('LNbits as a peer: each decodes the other\'s invoices', function () {
  let lnbits: Lnbits;
  let app: TestApp;
  let api: TypedApi;

  before(async function () {
    // Installing is scripts/ensure-tools.sh's; starting LNbits takes a while on a busy machine.
    this.timeout(180_000);
    lnbits = await startLnbitsOrSkip(this);
    app = await startTestApp();
    api = typedApi(app, (await createTestOrganization('LNbits peer')).secret);
  });
  after(async () => {
    await lnbits?.stop();
    await app?.close();
  });

  it('LNbits decodes our invoice to its amount, payment hash, description, expiry and our node\'s key', async () => {
    const created = await api.call('post', '/api/lightning/invoices', { body: { amount: 2100, description: 'two coffees, for a peer', reference: randomUUID(), expiry: 900 } });
    const invoice = bodyOf(created, 201);
    const decoded = await lnbits.decode(invoice.request);

    assert.equal(decoded.payment_hash, invoice.payment_hash);
    assert.equal(decoded.amount_msat, 2_100_000);
    assert.equal(decoded.description, 'two coffees, for a peer');
    assert.equal(decoded.currency, 'tb', 'a sandbox invoice is a testnet one');
    assert.equal(decoded.expiry, 900);
    assert.equal(decoded.date + decoded.expiry, Date.parse(invoice.expires_at) / 1000);
    const nodePublicKey = await withNodeKey((await testOrm()).em.fork(), app.deps.keys, 'sandbox', (_, publicKey) => publicKey);
    assert.equal(decoded.payee, nodePublicKey);
  });

  it('we decode an LNbits invoice to its amount, payment hash, memo, expiry and the payee LNbits reads', async () => {
    const invoice = await lnbits.createInvoice(1500, 'from LNbits');
    const theirs = await lnbits.decode(invoice.bolt11);
    const ours = bodyOf(await api.call('post', '/api/lightning/decode', { body: { request: invoice.bolt11 } }), 200);

    assert.equal(ours.payment_hash, invoice.payment_hash);
    assert.equal(ours.amount_sat, 1500);
    assert.equal(ours.amount_msat, 1_500_000);
    assert.equal(ours.description, 'from LNbits');
    assert.equal(ours.description_hash, null);
    assert.equal(ours.destination, theirs.payee);
    assert.equal(ours.expires_at, theirs.date + theirs.expiry);
    assert.equal(ours.is_expired, false);
  });
});
