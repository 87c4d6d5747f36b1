import assert from 'node:assert/strict';
import { PayoutQuote } from '../../src/payouts/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization, type TestResponse } from '../support/app';

const USDT_TRON_TO_NGN = { fromAsset: 'USDT', chain: 'tron', amount: '100', toCurrency: 'NGN', country: 'NG', paymentMethod: 'bank' };

/** Quotes through the real API and PostgreSQL, with the sandbox rate table (USDT = 1 USD, 1550 NGN per USD, 150 bps spread, 100 bps fee). */
describe('Payout quotes: pricing, corridors, limits and named refusals', () => {
  let app: TestApp;
  let org: TestOrganization;

  before(async () => {
    app = await startTestApp({ config: { PAYOUT_QUOTE_TTL_SECONDS: '600' } });
    org = await createTestOrganization('Payout quotes');
  });
  after(() => app?.close());

  const quote = (body: Record<string, unknown>, key = org.secret) => app.request('POST', '/payouts/quotes', { key, body });
  const expectError = (response: TestResponse, code: string, param?: string, status = 400) => {
    assert.equal(response.status, status, response.text);
    assert.equal(response.body.error.code, code, response.text);
    if (param !== undefined) assert.equal(response.body.error.param, param, response.text);
    return response.body.error;
  };
  const quoteCount = () => app.deps.orm.em.fork().count(PayoutQuote, { organization: org.organizationId });

  it('quotes an amount of the asset: rate, named fees, fromAmount, toAmount, limits and expiresAt', async () => {
    const before = Date.now();
    const response = await quote(USDT_TRON_TO_NGN);
    assert.equal(response.status, 201, response.text);
    const body = response.body;
    assert.equal(body.object, 'payout_quote');
    assert.equal(body.assetId, 'USDT_TRX');
    assert.equal(body.rate, '1526.75');
    assert.deepEqual(body.fees, [
      { type: 'service_fee', amount: '1', amountRaw: '1000000', asset: 'USDT' },
      { type: 'network_fee', amount: '1', amountRaw: '1000000', asset: 'USDT' },
    ]);
    assert.equal(body.fromAmount, '100');
    assert.equal(body.fromAmountRaw, '100000000');
    assert.equal(body.toAmount, '149621.50');
    assert.equal(body.toAmountRaw, '14962150');
    assert.deepEqual(body.limits, { currency: 'NGN', min: '1000.00', max: '75000000.00' });
    const expiresIn = Date.parse(body.expiresAt) - before;
    assert.ok(expiresIn >= 599_000 && expiresIn <= 601_000 + 5_000, `expires in the configured 600 s (${expiresIn} ms)`);
  });

  it('quotes an amount of the destination currency: the beneficiary receives exactly that', async () => {
    const response = await quote({ ...USDT_TRON_TO_NGN, amount: '150000', amountCurrency: 'NGN' });
    assert.equal(response.status, 201, response.text);
    assert.equal(response.body.toAmount, '150000.00');
    assert.equal(response.body.amountCurrency, 'NGN');
    // (150,000 / 1526.75 + 1) / 0.99, rounded up to the micro-USDT, then the smallest that reaches it.
    assert.equal(response.body.fromAmountRaw, '100250418');
    const ugx = await quote({ fromAsset: 'USDC', chain: 'ethereum', amount: '370000', amountCurrency: 'UGX', toCurrency: 'UGX', country: 'UG', paymentMethod: 'mobile_money' });
    assert.equal(ugx.status, 201, ugx.text);
    assert.equal(ugx.body.toAmount, '370000', 'UGX has no minor units');
    const btc = await quote({ fromAsset: 'BTC', chain: 'bitcoin', amount: '0.01', toCurrency: 'KES', country: 'KE', paymentMethod: 'mobile_money' });
    assert.equal(btc.status, 201, btc.text);
    assert.equal(btc.body.fees[1].amountRaw, '2000');
  });

  it('refuses what it cannot quote with a named 400, storing nothing', async () => {
    const before = await quoteCount();
    expectError(await quote({ ...USDT_TRON_TO_NGN, country: 'FR', toCurrency: 'EUR' }), 'unsupported_corridor', 'country');
    expectError(await quote({ ...USDT_TRON_TO_NGN, toCurrency: 'KES' }), 'unsupported_corridor', 'toCurrency');
    expectError(await quote({ ...USDT_TRON_TO_NGN, paymentMethod: 'mobile_money' }), 'unsupported_corridor', 'paymentMethod');
    expectError(await quote({ ...USDT_TRON_TO_NGN, fromAsset: 'USDC' }), 'unsupported_asset', 'fromAsset');
    expectError(await quote({ ...USDT_TRON_TO_NGN, fromAsset: 'ETH', chain: 'ethereum' }), 'unsupported_asset', 'fromAsset');
    const below = expectError(await quote({ ...USDT_TRON_TO_NGN, amount: '1.5' }), 'amount_below_minimum', 'amount');
    assert.deepEqual(below.details, { currency: 'NGN', min: '1000.00', max: '75000000.00' });
    expectError(await quote({ ...USDT_TRON_TO_NGN, amount: '1' }), 'amount_below_minimum', 'amount');
    expectError(await quote({ ...USDT_TRON_TO_NGN, amount: '0' }), 'amount_below_minimum', 'amount');
    expectError(await quote({ ...USDT_TRON_TO_NGN, amount: '100000' }), 'amount_above_maximum', 'amount');
    expectError(await quote({ ...USDT_TRON_TO_NGN, amount: '100000000', amountCurrency: 'NGN' }), 'amount_above_maximum', 'amount');
    expectError(await quote({ ...USDT_TRON_TO_NGN, amount: '1.0000001' }), 'validation_failed', 'amount');
    expectError(await quote({ ...USDT_TRON_TO_NGN, amount: '150000.001', amountCurrency: 'NGN' }), 'validation_failed', 'amount');
    expectError(await quote({ ...USDT_TRON_TO_NGN, amountCurrency: 'KES' }), 'validation_failed', 'amountCurrency');
    expectError(await quote({ ...USDT_TRON_TO_NGN, amount: 100 }), 'validation_failed', 'amount');
    expectError(await quote({ ...USDT_TRON_TO_NGN, country: 'ng' }), 'validation_failed', 'country');
    expectError(await quote({ ...USDT_TRON_TO_NGN, chain: 'dogecoin' }), 'validation_failed', 'chain');
    expectError(await quote({ ...USDT_TRON_TO_NGN, paymentMethod: 'cash' }), 'validation_failed', 'paymentMethod');
    expectError(await quote({ ...USDT_TRON_TO_NGN, extra: true }), 'validation_failed');
    assert.equal(await quoteCount(), before, 'no quote was stored');
  });

  it('needs payouts:write; a live key is refused 503 payout_rail_unavailable (no live rail), and no quote is stored', async () => {
    const reader = await org.key(['payouts:read']);
    expectError(await quote(USDT_TRON_TO_NGN, reader.secret), 'insufficient_scope', undefined, 403);
    const live = await org.key(['*'], 'live');
    const before = await quoteCount();
    const refused = await quote(USDT_TRON_TO_NGN, live.secret);
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.body.error.code, 'payout_rail_unavailable');
    assert.equal(refused.body.error.type, 'provider_error');
    assert.equal(refused.headers.get('retry-after'), null, 'retrying does not bring a rail');
    assert.equal(await quoteCount(), before, 'no quote was stored');
    // Bad input from a live key is still 400: the refusal never hides a validation error.
    expectError(await quote({ ...USDT_TRON_TO_NGN, country: 'ng' }, live.secret), 'validation_failed', 'country');
  });
});
