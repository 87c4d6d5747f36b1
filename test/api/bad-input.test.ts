import assert from 'node:assert/strict';
import { INT4_MAX } from '../../src/shared/schemas';
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

  it('says what is wrong in our words, naming the field; an unknown field is named in param', async () => {
    const message = (response: { body: any }) => response.body.error.message as string;
    const missing = await call('POST', '/v1/webhooks', { url: 'https://93.184.215.14/hook' });
    assertValidation(missing, 'name');
    assert.equal(message(missing), 'name is required');
    assert.deepEqual(missing.body.error.details.issues[0], { param: 'name', code: 'invalid_type', message: 'name is required', location: 'body' });

    const unknown = await call('POST', '/v1/vaults', { name: 'Treasury', colour: 'blue', size: 2 });
    assertValidation(unknown, 'colour');
    assert.equal(message(unknown), 'colour is not a known field of this request');
    assert.deepEqual(unknown.body.error.details.issues.map((issue: { param: string }) => issue.param), ['colour', 'size']);

    const numeric = await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: '0x52908400098527886E0F7030069857D2E4169EE7', asset: 'ETH', amount: 5 });
    assertValidation(numeric, 'amount');
    assert.equal(message(numeric), 'amount must be a decimal string such as "12.5" (a string, not a JSON number)');
    const malformed = await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: '0x52908400098527886E0F7030069857D2E4169EE7', asset: 'ETH', amount: '1e5' });
    assert.match(message(malformed), /^amount must be a decimal string greater than zero such as "12.5"/);

    const address = await call('POST', '/v1/address-book', { chain: 'ethereum', address: 'nope', label: 'Cold' });
    assertValidation(address, 'address');
    assert.match(message(address), /^address must be an ethereum address/);
    const wrongType = await call('POST', '/v1/vaults', { name: 42 });
    assert.equal(message(wrongType), 'name must be a string');
    const tooMany = await call('GET', '/v1/vaults?limit=101');
    assertValidation(tooMany, 'limit');
    assert.equal(message(tooMany), 'limit must be at most 100');
    const choice = await call('POST', '/v1/sandbox/balances', { amount: 5, currency: 'EUR' });
    assert.equal(message(choice), 'currency must be one of USD, BTC, USDT, USDC, usd, sat');
    for (const response of [missing, unknown, numeric, malformed, address, wrongType, tooMany, choice]) {
      assert.doesNotMatch(message(response), /Invalid input|expected .*, received|Unrecognized key/, message(response));
    }
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

  // Positive-data fuzzing (docs/fuzzing.md): each of these the document allowed and validation refused; now both say the same.
  it('refuses a zero amount where one is refused, as the document now says, and amounts past the asset\'s decimals', async () => {
    const ETHEREUM = '0x52908400098527886e0f7030069857d2e4169ee7';
    const balances = async () => (await call('GET', '/v1/balances')).body.data.map((balance: { available: string }) => balance.available);
    const before = await balances();
    assertValidation(await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: ETHEREUM, asset: 'ETH', amount: '0' }), 'amount');
    assertValidation(await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: ETHEREUM, asset: 'ETH', amount: '0.000' }), 'amount');
    assertValidation(await call('POST', '/v1/sandbox/balances', { amount: '0', currency: 'BTC' }), 'amount');
    assertValidation(await call('POST', '/v1/sandbox/balances', { amount: 0, currency: 'BTC' }), 'amount');
    assertValidation(await call('POST', '/v1/gas-stations', { name: 'Zero refill', chain: 'ethereum', threshold: '0', refill_amount: '0' }), 'refill_amount');
    // A cross-field rule (the chain's native decimals: TRX 6, BTC 8), listed in test/support/fuzz_checks.py.
    assertValidation(await call('POST', '/v1/gas-stations', { name: 'TRX budget', chain: 'tron', threshold: '1', daily_sponsorship_budget: '90.00112546' }), 'daily_sponsorship_budget');
    assertValidation(await call('POST', '/v1/gas-stations', { name: 'BTC threshold', chain: 'bitcoin', threshold: '0.000000001' }), 'threshold');
    assert.equal((await call('GET', '/v1/gas-stations')).body.data.length, 0, 'no station was created');
    assert.deepEqual(await balances(), before, 'nothing was credited');
  });

  it('bounds request integers by their documented maximum: a rule\'s order, an approval count', async () => {
    const policy = await call('POST', '/v1/policies', { name: 'Integer bounds' });
    assert.equal(policy.status, 201, policy.text);
    const rules = `/v1/policies/${policy.body.id}/rules`;
    for (const order of [2 ** 53 + 2, INT4_MAX + 1]) assertValidation(await call('POST', rules, { name: 'Far', action_type: 'allow', order }), 'order');
    const appended = await call('POST', rules, { name: 'Last', action_type: 'allow', order: INT4_MAX });
    assert.equal(appended.status, 201, appended.text);
    assert.equal(appended.body.order, 1, 'an order past the end appends');
    assertValidation(await call('POST', '/v1/policies/evaluate', { approval_count: 2 ** 53 + 2 }), 'approval_count');
    assertValidation(await call('POST', '/v1/policies/evaluate', { approval_count: INT4_MAX + 1 }), 'approval_count');
    const evaluated = await call('POST', '/v1/policies/evaluate', { approval_count: INT4_MAX });
    assert.equal(evaluated.status, 200, evaluated.text);
  });

  it('counts a trimmed string\'s minimum after trimming and its maximum as sent, in code points as the document does', async () => {
    const policy = await call('POST', '/v1/policies', { name: 'Lengths' });
    const rules = `/v1/policies/${policy.body.id}/rules`;
    // 2 characters as sent, 1 once trimmed: the document's pattern refuses it too.
    assertValidation(await call('POST', rules, { name: '\r\u00e9', action_type: 'allow' }), 'name');
    assertValidation(await call('POST', '/v1/vaults', { name: '\u00a0\u3000' }), 'name');
    assertValidation(await call('POST', '/v1/vaults', { name: `a${' '.repeat(255)}` }), 'name');
    const rule = await call('POST', rules, { name: ' \u00e9x ', action_type: 'allow' });
    assert.equal(rule.status, 201, rule.text);
    assert.equal(rule.body.name, '\u00e9x');

    // Astral characters are 1 code point each (JSON Schema's count), 2 UTF-16 units (zod's own).
    const emoji = '\u{1F600}';
    const vaults = async () => (await call('GET', '/v1/vaults?limit=100')).body.data.length;
    const vaultsBefore = await vaults();
    const astral = await call('POST', '/v1/vaults', { name: emoji.repeat(255), metadata: { [emoji.repeat(40)]: emoji.repeat(500) } });
    assert.equal(astral.status, 201, astral.text);
    assert.deepEqual(Object.keys(astral.body.metadata), [emoji.repeat(40)]);
    assertValidation(await call('POST', '/v1/vaults', { name: emoji.repeat(256) }), 'name');
    assertValidation(await call('POST', '/v1/vaults', { name: 'Key', metadata: { [emoji.repeat(41)]: 1 } }), `metadata.${emoji.repeat(41)}`);
    assertValidation(await call('POST', '/v1/vaults', { name: 'Value', metadata: { desk: emoji.repeat(501) } }), 'metadata.desk');
    assert.equal(await vaults(), vaultsBefore + 1, 'only the vault at the bounds was created');
  });

  it("refuses a sandbox authorization's occurred_at outside the documented years 2000 to 2999", async () => {
    const path = `/v1/sandbox/cards/${crypto.randomUUID()}/authorizations`;
    for (const occurredAt of ['0051-05-28T18:21:01+13:43', '1999-12-31T23:59:59Z', '3000-01-01T00:00:00Z', '2026-02-30T00:00:00Z']) assertValidation(await call('POST', path, { amount: 1, occurred_at: occurredAt }), 'occurred_at');
    // Within the bound, validation passes and the unknown card answers.
    const inBound = await call('POST', path, { amount: 1, occurred_at: '2000-01-01T00:00:00+14:00' });
    assert.equal(inBound.status, 404, inBound.text);
  });
});
