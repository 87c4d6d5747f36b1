import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { CardTransaction } from '../../src/cards/entities';
import { LightningInvoice } from '../../src/lightning/entities';
import { PolicyAuditLog } from '../../src/policies/entities';
import type { OperationType } from '../../src/policies/schema';
import { validCustomer } from '../support/cards';
import { eventually } from '../support/eventually';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { createTestWorker } from '../support/worker';

const FEE_BPS = 150;
const CATCH_ALL = { field: 'amount', operator: 'greater_than_or_equal', value: '0' };

interface Decision {
  allowed: boolean;
  result: string;
  request: Record<string, unknown>;
}

/**
 * The movement gate's table, continued (test/api/movement-gate.test.ts holds the on-chain kinds):
 * every movement out of a balance the service holds, through the real API, Temporal and PostgreSQL.
 * A block-all policy refuses it before any money moves (no payment or card transaction recorded,
 * no balance touched); an allow-all policy lets it go; approval and delay rules refuse it (no held
 * flow exists for these kinds), an alert rule lets it through and records the alert. Every decision
 * is audited with the movement's amount, asset, USD value, fee and destination.
 */
describe('The movement gate: Lightning payments, card fundings and withdrawals', () => {
  let app: TestApp;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  let approverId: string;
  let cardId: string;
  const taskQueue = `movement-gate-balances-${randomUUID()}`;
  // The key's rate limit is not what this file tests: its snapshots and polls, quicker on Node 26, ran into 429s.
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, CARD_FUNDING_FEE_BPS: String(FEE_BPS), RATE_LIMIT_PER_SECOND: '1000', RATE_LIMIT_BURST: '1000' };

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const ok = async (method: string, path: string, body?: unknown) => {
    const response = await call(method, path, body);
    assert.ok(response.status >= 200 && response.status < 300, `${method} ${path}: ${response.status} ${response.text}`);
    return response.body;
  };
  const balances = async () => ((await ok('GET', '/v1/balances')).data as { currency: string; available: string; reserved: string }[]).map((b) => `${b.currency} ${b.available}/${b.reserved}`);
  const card = async () => (await ok('GET', `/api/cards/${cardId}`)).data.card as { balance_amount: string; status: string };
  const recorded = async () => {
    const em = (await testOrm()).em.fork();
    return [await em.count(LightningInvoice, { organization: org.organizationId, direction: 'outgoing' }), await em.count(CardTransaction, { organization: org.organizationId })];
  };
  async function cardIsActive(id: string) {
    await eventually(async () => ((await ok('GET', `/api/cards/${id}`)).data.card.status === 'active' ? true : undefined), 'card active', 30_000, 200);
  }

  before(async () => {
    app = await startTestApp({ config });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Balance movements');
    await setRequiredApprovals(org.organizationId, 0);
    approverId = (await ok('POST', '/v1/members', { name: 'Ann', email: `ann-${randomUUID()}@example.com`, org_role: 'approver' })).id;
    await ok('POST', '/v1/sandbox/balances', { currency: 'sat', amount: '1000000' });
    await ok('POST', '/v1/sandbox/balances', { currency: 'usd', amount: '1000000' });
    // A card with 500.00 (cents) on it, funded before any policy is enforced, to fund and withdraw from.
    cardId = (await ok('POST', '/api/cards', { amount: 50_000, card_type: 'virtual', currency: 'USD', name: 'Ada Lovelace', customer: validCustomer() })).data.card.id;
    await cardIsActive(cardId);
    await eventually(async () => ((await card()).balance_amount === '50000' ? true : undefined), 'initial funding settled', 30_000, 200);
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await app?.close();
  });

  let payee = '';
  /** Each kind, how it is attempted (the status it answers when it goes), and the fields its decision must carry. */
  const KINDS: { operation: OperationType; label: string; attempt: () => Promise<{ status: number; code: string | null }>; fields: () => Record<string, unknown> }[] = [
    {
      operation: 'lightning_payment',
      label: 'a Lightning payment',
      attempt: async () => {
        const remote = await ok('POST', '/v1/sandbox/lightning/invoices', { node: 'ok', amount: 1_000 });
        payee = remote.destination;
        return outcome(await call('POST', '/api/lightning/payments', { request: remote.request, reference: randomUUID(), max_fee: 5 }));
      },
      fields: () => ({
        source_type: 'lightning_balance',
        tx_type: 'balance_transfer',
        asset_symbol: 'BTC',
        amount: '0.00001',
        amount_raw: '1000',
        // 1,000 sats at the sandbox's 65,000 USD per BTC.
        amount_usd: '0.65',
        fee_raw: '5',
        price_unavailable: false,
        to_address: payee,
        destination_type: 'lightning_node',
      }),
    },
    {
      operation: 'card_funding',
      label: 'a card funding',
      attempt: async () => outcome(await call('POST', `/api/cards/${cardId}/balance`, { type: 'fund', amount: 1_000, reference: randomUUID() })),
      fields: () => ({ source_type: 'company_balance', asset_symbol: 'USD', amount: '10', amount_raw: '1000', amount_usd: '10', fee_raw: '15', to_address: cardId, destination_type: 'card' }),
    },
    {
      operation: 'card_funding',
      label: "a new card's initial funding",
      attempt: async () => outcome(await call('POST', '/api/cards', { amount: 2_000, card_type: 'virtual', currency: 'USD', name: 'Grace Hopper', customer: validCustomer() })),
      fields: () => ({ source_type: 'company_balance', asset_symbol: 'USD', amount: '20', amount_raw: '2000', amount_usd: '20', fee_raw: '30', destination_type: 'card' }),
    },
    {
      operation: 'card_withdrawal',
      label: 'a card withdrawal',
      attempt: async () => outcome(await call('POST', `/api/cards/${cardId}/balance`, { type: 'withdraw', amount: 1_000, reference: randomUUID() })),
      fields: () => ({ source_type: 'card', from_address: cardId, asset_symbol: 'USD', amount: '10', amount_raw: '1000', amount_usd: '10', fee_raw: '15', destination_type: 'company_balance' }),
    },
  ];

  const outcome = (response: { status: number; body: { error?: { code: string } } }) => ({ status: response.status, code: response.body.error?.code ?? null });

  async function decisionsOf(operation: OperationType, since: Date, action = 'decision'): Promise<Decision[]> {
    const entries = await (await testOrm()).em.fork().find(PolicyAuditLog, { organization: org.organizationId, action, createdAt: { $gte: since } }, { orderBy: { createdAt: 'desc' } });
    return entries
      .map((entry) => entry.metadata as { decision?: { allowed: boolean; result: string }; request: Record<string, unknown> })
      .filter((metadata) => metadata.request.operation_type === operation)
      .map((metadata) => ({ allowed: metadata.decision?.allowed ?? true, result: metadata.decision?.result ?? 'alert', request: metadata.request }));
  }

  let enforced: string | undefined;
  async function enforce(rule: Record<string, unknown>) {
    const policy = await ok('POST', '/v1/policies', { name: `Balances ${randomUUID()}`, rules: [rule] });
    await ok('POST', `/v1/policies/${policy.id}/activate`, {});
    if (enforced) await ok('DELETE', `/v1/policies/${enforced}`);
    enforced = policy.id;
  }
  /** Each rule matches every movement, as the validator's suggested catch-all does. */
  const RULES = {
    'block-all': () => ({ name: 'Block everything', action_type: 'block', conditions: [CATCH_ALL] }),
    'allow-all': () => ({ name: 'Allow everything', action_type: 'allow', conditions: [CATCH_ALL] }),
    approval: () => ({ name: 'Approve', action_type: 'require_approval', action_config: { approvers: [{ id: approverId, type: 'user' }], required_approvals: 1 }, conditions: [CATCH_ALL] }),
    delay: () => ({ name: 'Cool down', action_type: 'delay', action_config: { delay_minutes: 30 }, conditions: [CATCH_ALL] }),
    alert: () => ({ name: 'Watch', action_type: 'alert', conditions: [CATCH_ALL] }),
  };
  const REFUSALS: Partial<Record<keyof typeof RULES, [number, string]>> = {
    'block-all': [403, 'policy_blocked'],
    approval: [400, 'policy_approval_required'],
    delay: [400, 'policy_delay_required'],
  };

  for (const kind of KINDS) {
    for (const ruleName of Object.keys(RULES) as (keyof typeof RULES)[]) {
      const refusal = REFUSALS[ruleName];
      it(`${kind.label} (${kind.operation}): ${refusal ? `${ruleName} refuses it (${refusal[1]}), nothing moves` : `${ruleName} lets it go`}; the decision carries its fields`, async () => {
        await enforce(RULES[ruleName]());
        // What an earlier test let go (a payment, a new card's funding) settles in its workflow: none still reserved, so
        // that it does not settle between this test's snapshots.
        await eventually(async () => ((await balances()).every((balance) => balance.endsWith('/0')) ? true : undefined), 'earlier movements settled', 30_000, 200);
        const since = new Date();
        const [balancesBefore, recordedBefore, cardBefore] = [await balances(), await recorded(), await card()];
        const result = await kind.attempt();
        const [decision] = await decisionsOf(kind.operation, since);
        assert.ok(decision, `the ${kind.operation} decision is audited`);
        assert.equal(decision.request.operation_type, kind.operation);
        assert.equal(decision.request.actor_id, org.apiKeyId);
        for (const [field, value] of Object.entries(kind.fields())) assert.deepEqual(decision.request[field], value, `${field} in the decision`);
        if (refusal) {
          assert.deepEqual(result, { status: refusal[0], code: refusal[1] });
          assert.equal(decision.allowed, false);
          assert.deepEqual(await recorded(), recordedBefore, 'no payment or card transaction recorded');
          assert.deepEqual(await balances(), balancesBefore, 'no balance touched');
          assert.deepEqual(await card(), cardBefore, 'the card is as it was');
          return;
        }
        assert.ok(result.status === 200 || result.status === 201, JSON.stringify(result));
        assert.equal(decision.allowed, true);
        if (ruleName === 'alert') assert.equal((await decisionsOf(kind.operation, since, 'alert')).length, 1, 'the alert is recorded');
      });
    }
  }
});

/**
 * USD rules fail closed for Lightning too: with no BTC price (a sandbox price table without BTC), a
 * payment's USD value is unknown, so "block above 100 USD" refuses a payment of 1,000 sats.
 */
describe('The movement gate: a Lightning payment of unknown USD value meets USD block rules', () => {
  let app: TestApp;
  let org: TestOrganization;

  before(async () => {
    app = await startTestApp({ config: { PRICE_TABLE_SANDBOX: 'ETH=3000' } });
    org = await createTestOrganization('Lightning without a BTC price');
    await setRequiredApprovals(org.organizationId, 0);
  });
  after(async () => app?.close());

  it('refuses it (403 policy_blocked), the decision saying price_unavailable', async () => {
    const request = async (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
    await request('POST', '/v1/sandbox/balances', { currency: 'sat', amount: '100000' });
    const policy = await request('POST', '/v1/policies', {
      name: 'USD cap',
      rules: [
        { name: 'Block above 100 USD', action_type: 'block', conditions: [{ field: 'amount_usd', operator: 'greater_than', value: '100' }] },
        { name: 'Allow the rest', action_type: 'allow', conditions: [CATCH_ALL] },
      ],
    });
    const activated = await request('POST', `/v1/policies/${policy.body.id}/activate`, {});
    assert.equal(activated.status, 200, activated.text);
    const remote = (await request('POST', '/v1/sandbox/lightning/invoices', { node: 'ok', amount: 1_000 })).body;
    const paid = await request('POST', '/api/lightning/payments', { request: remote.request, reference: randomUUID() });
    assert.equal(paid.status, 403, paid.text);
    assert.equal(paid.body.error.code, 'policy_blocked');
    const [entry] = await (await testOrm()).em.fork().find(PolicyAuditLog, { organization: org.organizationId, action: 'decision' }, { orderBy: { createdAt: 'desc' }, limit: 1 });
    const metadata = entry!.metadata as { decision: { price_unavailable?: boolean }; request: Record<string, unknown> };
    assert.equal(metadata.decision.price_unavailable, true);
    assert.equal(metadata.request.amount_usd, undefined);
    assert.equal(metadata.request.price_unavailable, true);
  });
});
