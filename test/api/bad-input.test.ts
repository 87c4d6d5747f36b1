import assert from 'node:assert/strict';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';

/** Inputs seen answering 500 or accepted wrongly: each must be a 400 in the contract's envelope that changes nothing. */
describe('Bad input answers 400 and changes nothing', () => {
  let app: TestApp;
  let org: TestOrganization;

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization();
  });
  after(() => app?.close());

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const cursor = (createdAt: string, id: string) => Buffer.from(JSON.stringify([createdAt, id])).toString('base64url');

  function assertValidation(response: { status: number; body: any }, param: string) {
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.equal(response.body.error.code, 'validation_failed');
    assert.equal(response.body.error.type, 'invalid_request_error');
    assert.equal(response.body.error.param, param);
    assert.ok(response.body.error.request_id);
  }

  it('refuses a NUL character anywhere: body strings, keys, nested metadata, path ids and the query', async () => {
    assertValidation(await call('POST', '/v1/vaults', { name: 'Trea\u0000sury' }), 'name');
    assertValidation(await call('POST', '/v1/vaults', { name: 'Treasury', metadata: { ['de\u0000sk']: 'ops' } }), 'metadata.de\u0000sk');
    assertValidation(await call('POST', '/v1/vaults', { name: 'Treasury', metadata: { desk: ['ok', 'o\u0000ps'] } }), 'metadata.desk.1');
    assertValidation(await call('GET', '/v1/vaults/abc%00def'), 'path');
    assertValidation(await call('GET', '/api/cards?search=a%00b'), 'query');
    assert.equal((await call('GET', '/v1/vaults')).body.data.length, 0, 'no vault was created');
  });

  it('refuses a well-formed cursor that carries a forged id or an instant outside what the service writes', async () => {
    assertValidation(await call('GET', `/v1/vaults?cursor=${cursor('2026-01-01T00:00:00.000Z', 'not-a-uuid')}`), 'cursor');
    assertValidation(await call('GET', `/api/cards?cursor=${cursor('2026-01-01T00:00:00.000Z', 'vlt_x')}`), 'cursor');
    assertValidation(await call('GET', `/v1/vaults?cursor=${cursor('0001-01-01T00:00:00.000Z', crypto.randomUUID())}`), 'cursor');
    assertValidation(await call('GET', `/v1/vaults?cursor=${cursor('+275760-09-13T00:00:00.000Z', crypto.randomUUID())}`), 'cursor');
    assertValidation(await call('GET', `/v1/api-keys?cursor=${cursor('2026-01-01T00:00:00.000Z', "key'; drop table x")}`), 'cursor');
    const page = await call('GET', `/v1/vaults?cursor=${cursor('2026-01-01T00:00:00.000Z', crypto.randomUUID())}`);
    assert.equal(page.status, 200, 'a well-formed cursor still pages');
  });

  it('refuses a JSON null body where the body is an object, even one whose fields are all optional', async () => {
    // Found by fuzzing: PATCH /v1/policies/:id took `null` for `{}` and answered 200.
    const policy = await call('POST', '/v1/policies', { name: 'Null body' });
    assert.equal(policy.status, 201, policy.text);
    const patched = await app.request('PATCH', `/v1/policies/${policy.body.id}`, { key: org.secret, rawBody: 'null', headers: { 'content-type': 'application/json' } });
    assertValidation(patched, 'body');
    assert.equal((await call('GET', `/v1/policies/${policy.body.id}`)).body.updated_at, policy.body.updated_at, 'nothing changed');
  });

  it('caps sandbox credits, whether the amount is a number or a string, and takes the currency codes GET /v1/balances shows', async () => {
    assertValidation(await call('POST', '/v1/sandbox/balances', { amount: '1'.repeat(41), currency: 'USD' }), 'amount');
    assertValidation(await call('POST', '/v1/sandbox/balances', { amount: '1'.repeat(26), currency: 'USD' }), 'amount');
    assertValidation(await call('POST', '/v1/sandbox/balances', { amount: 1e40, currency: 'USD' }), 'amount');
    assertValidation(await call('POST', '/v1/sandbox/balances', { amount: '0', currency: 'USD' }), 'amount');
    // Found by fuzzing: a string that is no integer answered 500 (the refinement ran after the failed union).
    assertValidation(await call('POST', '/v1/sandbox/balances', { amount: 'AAA', currency: 'USD', reference: '0' }), 'amount');
    assertValidation(await call('POST', '/v1/sandbox/balances', { amount: 5, currency: 'EUR' }), 'currency');
    const before = await call('GET', '/v1/balances');
    assert.deepEqual(before.body.data.map((balance: { available: string }) => balance.available), ['0', '0', '0', '0'], 'nothing was credited');

    const usd = await call('POST', '/v1/sandbox/balances', { amount: '1000000000000000', currency: 'USD' });
    assert.equal(usd.status, 200, usd.text);
    assert.equal(usd.body.currency, 'USD');
    const btc = await call('POST', '/v1/sandbox/balances', { amount: 2500, currency: 'BTC' });
    assert.equal(btc.status, 200, btc.text);
    assert.deepEqual([btc.body.currency, btc.body.unit, btc.body.available], ['BTC', 'sat', '2500']);
    const after = await call('GET', '/v1/balances');
    assert.deepEqual(
      after.body.data.map((balance: { currency: string; available: string }) => [balance.currency, balance.available]),
      [
        ['USD', '1000000000000000'],
        ['BTC', '2500'],
        ['USDT', '0'],
        ['USDC', '0'],
      ],
    );
  });

  it('takes PATCH /v1/policies/:id with no body, as the document says (its body is not required)', async () => {
    const policy = await call('POST', '/v1/policies', { name: 'No body' });
    assert.equal(policy.status, 201, policy.text);
    const patched = await call('PATCH', `/v1/policies/${policy.body.id}`);
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.body.name, 'No body');
  });

  it("refuses an address not of the chain's shape on `address`, before any service reads it; one of that shape is taken", async () => {
    const ETHEREUM = '0x52908400098527886e0f7030069857d2e4169ee7';
    assertValidation(await call('POST', '/v1/address-book', { chain: 'tron', address: ETHEREUM, label: 'Not tron' }), 'address');
    assertValidation(await call('POST', '/v1/sandbox/deposits', { chain: 'solana', address: ETHEREUM, asset: 'SOL', amount: '1' }), 'address');
    assertValidation(await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: ETHEREUM, asset: 'SOL', amount: '1' }), 'asset');
    assertValidation(await call('POST', '/v1/subscriptions', { chain: 'bitcoin', address: ETHEREUM, webhook_url: 'https://hooks.example.com/x' }), 'address');
    // The chain decides the shape: an unknown one is named, not the address.
    assertValidation(await call('POST', '/v1/address-book', { chain: 'dogecoin', address: ETHEREUM, label: 'Doge' }), 'chain');
    assert.equal((await call('GET', '/v1/address-book')).body.data.length, 0, 'nothing was added');
    // Surrounding spaces are trimmed before the shape is checked, as before.
    const added = await call('POST', '/v1/address-book', { chain: 'ethereum', address: ` ${ETHEREUM} `, label: 'Ethereum' });
    assert.equal(added.status, 201, added.text);
  });

  it('takes metadata at the bounds the document states (50 keys of 1 to 40 characters) and refuses past them', async () => {
    const keys = (count: number, length: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [String(i).padStart(length, 'k'), i]));
    const created = await call('POST', '/v1/vaults', { name: 'Bounds', metadata: keys(50, 40) });
    assert.equal(created.status, 201, created.text);
    assert.equal(Object.keys(created.body.metadata).length, 50);
    assertValidation(await call('POST', '/v1/vaults', { name: 'Too many', metadata: keys(51, 40) }), 'metadata');
    assertValidation(await call('POST', '/v1/vaults', { name: 'Too long', metadata: keys(1, 41) }), 'metadata.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk0');
    assertValidation(await call('POST', '/v1/vaults', { name: 'Empty key', metadata: { '': 1 } }), 'metadata.');
    assert.deepEqual((await call('GET', '/v1/vaults')).body.data.map((vault: { name: string }) => vault.name), ['Bounds']);
  });

  it('refuses the email fuzzing found that `format: email` admits, as the pattern the document now gives does', async () => {
    assertValidation(await call('POST', '/v1/members', { name: 'Ada', email: 'e!n@upztila9.02kkd6y9.example', org_role: 'viewer' }), 'email');
    const added = await call('POST', '/v1/members', { name: 'Ada', email: 'ada@example.com', org_role: 'viewer' });
    assert.equal(added.status, 201, added.text);
  });
});
