import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createTestOrganization, type TestApp, type TestOrganization } from '../support/app';
import { eventually } from '../support/eventually';
import { assertLedgerReconciles } from '../support/ledger';
import { startAppWithWorker } from '../support/worker';

/**
 * The sandbox network's payees behave as real ones: an invoice settles once. Another organization paying
 * the same remote invoice (its own payment: a payee does not know who pays) is refused by the payee, as a
 * real node refuses an HTLC for an invoice it already settled: failed, unpaid, its reserve released.
 */
describe('Lightning API: a sandbox payee settles an invoice once', () => {
  let app: TestApp;
  let stop: () => Promise<void>;

  before(async () => {
    ({ app, stop } = await startAppWithWorker({ TEMPORAL_TASK_QUEUE: `lightning-payees-${randomUUID()}` }));
  });
  after(() => stop?.());

  const satBalance = async (org: TestOrganization) => {
    const response = await app.request('GET', '/v1/balances', { key: org.secret });
    const sat = response.body.data.find((balance: { unit: string }) => balance.unit === 'sat') as { available: string; reserved: string };
    return { available: BigInt(sat.available), reserved: BigInt(sat.reserved) };
  };
  const fundedOrganization = async (name: string) => {
    const org = await createTestOrganization(name);
    await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: { currency: 'sat', amount: '20000' } });
    return org;
  };
  const remoteInvoice = async (org: TestOrganization, node: string) =>
    (await app.request('POST', '/v1/sandbox/lightning/invoices', { key: org.secret, body: { node, amount: 10_000, description: 'one coffee machine' } })).body.request as string;
  const pay = async (org: TestOrganization, request: string) => {
    const created = await app.request('POST', '/api/lightning/payments', { key: org.secret, body: { request, reference: randomUUID() } });
    assert.equal(created.status, 201, created.text);
    return created.body.data.id as string;
  };
  const ended = (org: TestOrganization, id: string) =>
    eventually(
      async () => {
        const payment = (await app.request('GET', `/api/lightning/payments/${id}`, { key: org.secret })).body.data as { status: string; preimage: string; failure_reason: string | null };
        return payment.status === 'pending' ? undefined : payment;
      },
      `payment ${id} to end`,
      20_000,
    );

  it('a second organization paying an invoice the payee already settled: failed, unpaid, not debited', async () => {
    const [first, second] = [await fundedOrganization('first payer'), await fundedOrganization('second payer')];
    const request = await remoteInvoice(first, 'ok');
    const paid = await ended(first, await pay(first, request));
    assert.equal(paid.status, 'paid');
    assert.deepEqual(await satBalance(first), { available: 20_000n - 10_011n, reserved: 0n }, 'amount plus the sandbox fee (1 sat + 1000 ppm)');

    const refused = await ended(second, await pay(second, request));
    assert.deepEqual([refused.status, refused.failure_reason, refused.preimage], ['failed', 'incorrect_or_unknown_payment_details', '']);
    assert.deepEqual(await satBalance(second), { available: 20_000n, reserved: 0n }, 'nothing spent, nothing left reserved');
    await assertLedgerReconciles(second.organizationId);
  });

  it('two organizations paying one invoice at once: the payee settles one, the other fails unpaid', async () => {
    const payers = [await fundedOrganization('payer a'), await fundedOrganization('payer b')];
    // The slow payee answers after 3 s: both payments are in flight together.
    const request = await remoteInvoice(payers[0]!, 'slow');
    const ids = await Promise.all(payers.map((org) => pay(org, request)));
    const outcomes = await Promise.all(payers.map((org, index) => ended(org, ids[index]!)));
    assert.deepEqual(outcomes.map((outcome) => outcome.status).sort(), ['failed', 'paid']);
    const balances = await Promise.all(payers.map(satBalance));
    assert.deepEqual(
      balances.map((balance) => balance.available).sort((a, b) => (a < b ? -1 : 1)),
      [20_000n - 10_011n, 20_000n],
      'one debited amount plus fee, the other not at all',
    );
    assert.ok(balances.every((balance) => balance.reserved === 0n));
  });
});
