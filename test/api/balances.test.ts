import assert from 'node:assert/strict';
import { applyBalanceEntry, readBalances } from '../../src/balances/service';
import { DomainError } from '../../src/shared/errors';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

describe('Company balances', () => {
  let app: TestApp;
  let org: TestOrganization;

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization();
  });
  after(() => app?.close());

  const move = async (organizationId: string, kind: 'credit' | 'debit' | 'reserve' | 'release' | 'capture', amount: bigint, id: string) =>
    (await testOrm()).em.fork().transactional((em) =>
      applyBalanceEntry(em, { organizationId, environment: 'sandbox', currency: 'usd', kind, amount, reference: { type: 'sandbox_credit', id } }),
    );

  it('starts at zero in both currencies and takes sandbox credits once per reference', async () => {
    const empty = await app.request('GET', '/v1/balances', { key: org.secret });
    assert.equal(empty.status, 200);
    assert.deepEqual(
      empty.body.data.map((b: { currency: string; unit: string; available: string }) => [b.currency, b.unit, b.available]),
      [
        ['USD', 'cent', '0'],
        ['BTC', 'sat', '0'],
        ['USDT', 'micro', '0'],
        ['USDC', 'micro', '0'],
      ],
    );
    const credit = { amount: '500000', reference: 'top-up-1' };
    const first = await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: credit });
    assert.equal(first.status, 200);
    assert.equal(first.body.available, '500000');
    const again = await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: credit });
    assert.equal(again.body.available, '500000', 'the same reference credits once');
    const sats = await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: { amount: 21000, currency: 'sat' } });
    assert.equal(sats.body.unit, 'sat');
    assert.equal(sats.body.total, '21000');
  });

  it('keeps the sandbox and live balances of one organization apart', async () => {
    const both = await createTestOrganization('Two worlds');
    const live = await both.key(['*'], 'live');
    const credited = await app.request('POST', '/v1/sandbox/balances', { key: both.secret, body: { amount: '5000', currency: 'USD' } });
    assert.equal(credited.status, 200);
    const sandboxView = await app.request('GET', '/v1/balances', { key: both.secret });
    const liveView = await app.request('GET', '/v1/balances', { key: live.secret });
    assert.equal(sandboxView.body.data[0].available, '5000');
    assert.deepEqual(
      liveView.body.data.map((balance: { available: string; reserved: string }) => [balance.available, balance.reserved]),
      [
        ['0', '0'],
        ['0', '0'],
        ['0', '0'],
        ['0', '0'],
      ],
      'sandbox credits never fund the live balance',
    );
  });

  it('keeps sandbox helpers from live keys and checks scopes', async () => {
    const live = await createTestOrganization('Live', 'live');
    const refused = await app.request('POST', '/v1/sandbox/balances', { key: live.secret, body: { amount: '1' } });
    assert.equal(refused.status, 404);
    const reader = await org.key(['cards:read']);
    assert.equal((await app.request('GET', '/v1/balances', { key: reader.secret })).status, 200);
    const denied = await app.request('POST', '/v1/sandbox/balances', { key: reader.secret, body: { amount: '1' } });
    assert.equal(denied.status, 403);
    assert.deepEqual(denied.body.error.details.any_of, ['cards:write', 'lightning:write', 'payouts:write']);
    const lightningOnly = await org.key(['lightning:write']);
    const usdWithLightningKey = await app.request('POST', '/v1/sandbox/balances', { key: lightningOnly.secret, body: { amount: '1' } });
    assert.equal(usdWithLightningKey.status, 403);
    assert.equal(usdWithLightningKey.body.error.details.required_scope, 'cards:write');
    const invalid = await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: { amount: '-5' } });
    assert.equal(invalid.status, 400);
  });

  it('moves money exactly once per reference and never below zero under concurrency', async () => {
    const concurrent = await createTestOrganization('Concurrent');
    await move(concurrent.organizationId, 'credit', 1000n, 'funding');
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => move(concurrent.organizationId, 'debit', 100n, `spend-${i}`)));
    const refused = results.filter((result) => result.status === 'rejected');
    assert.equal(results.length - refused.length, 10);
    assert.ok(refused.every((result) => (result as PromiseRejectedResult).reason instanceof DomainError));
    assert.equal(((refused[0] as PromiseRejectedResult).reason as DomainError).code, 'insufficient_funds');
    const [usd] = await readBalances((await testOrm()).em.fork(), concurrent.organizationId, 'sandbox');
    assert.deepEqual(usd, { currency: 'usd', available: 0n, reserved: 0n });

    const repeat = await move(concurrent.organizationId, 'credit', 1000n, 'funding');
    assert.equal(repeat.applied, false, 'a repeated movement is not applied again');
    // A spend retried once the balance could no longer pay it: already applied, so a no-op, not a refusal.
    // Which ten spends won the race is up to the database: retry one that did.
    const applied = results.findIndex((result) => result.status === 'fulfilled');
    const retried = await move(concurrent.organizationId, 'debit', 100n, `spend-${applied}`);
    assert.deepEqual(retried, { applied: false, balance: { currency: 'usd', available: 0n, reserved: 0n } });

    // The same movement sent at once from many places lands once, in the balance and in the journal.
    const racing = await Promise.all(Array.from({ length: 8 }, () => move(concurrent.organizationId, 'credit', 250n, 'top-up')));
    assert.equal(racing.filter((result) => result.applied).length, 1);
    assert.deepEqual((await readBalances((await testOrm()).em.fork(), concurrent.organizationId, 'sandbox'))[0], { currency: 'usd', available: 250n, reserved: 0n });
    const [journal] = await (await testOrm()).em.fork().execute<{ entries: string }[]>(
      `select count(*) as entries from company_balance_entries where organization_id = ? and reference_id = 'top-up'`,
      [concurrent.organizationId],
    );
    assert.equal(Number(journal!.entries), 1);
  });

  it('reserves, captures and releases exactly', async () => {
    const held = await createTestOrganization('Held');
    await move(held.organizationId, 'credit', 10_000n, 'funding');
    assert.deepEqual((await move(held.organizationId, 'reserve', 3_000n, 'payment')).balance, { currency: 'usd', available: 7_000n, reserved: 3_000n });
    assert.deepEqual((await move(held.organizationId, 'capture', 2_500n, 'payment')).balance, { currency: 'usd', available: 7_000n, reserved: 500n });
    assert.deepEqual((await move(held.organizationId, 'release', 500n, 'payment')).balance, { currency: 'usd', available: 7_500n, reserved: 0n });
    await assert.rejects(move(held.organizationId, 'reserve', 7_501n, 'too-much'), (error: unknown) => error instanceof DomainError && error.code === 'insufficient_funds');
    await assert.rejects(move(held.organizationId, 'capture', 1n, 'nothing-reserved'), /only 0 reserved/);
  });
});
