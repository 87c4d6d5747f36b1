import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { CHAIN_IDS } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { refillFlow } from '../../src/gas-stations/flows/refill';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { PolicyAuditLog } from '../../src/policies/entities';
import type { OperationType } from '../../src/policies/schema';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { WalletBalance } from '../../src/custody/entities';
import { deployAnvilToken, startAnvil, type Anvil } from '../support/anvil';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { creditCustodyWallet } from '../support/ledger';
import { eventually } from '../support/eventually';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { terminateWorkflows } from '../support/scanning';
import { createTestWorker } from '../support/worker';

/** What a movement's attempt came to: it went (signed or submitted), or was refused with a code. */
interface Outcome {
  went: boolean;
  code: string | null;
}

interface Decision {
  actor_id: string;
  actor_type: string;
  result: string;
  allowed: boolean;
  request: Record<string, unknown>;
}

type Action = 'block' | 'approval' | 'actor' | 'alert';

/**
 * The movement gate's table: every kind of outgoing movement a custody address can make through the
 * API and its automations, under each kind of rule, on the Ethereum devnet through the real API,
 * Temporal and PostgreSQL. A block rule refuses it (nothing signed, no transaction, the chain
 * unchanged), an approval rule holds it, a rule on its actor matches it, an alert rule lets it
 * through and records the alert; every decision is audited with its actor. (Payout refunds, made
 * by the service's payout desk, are in test/workflows/payout-trip.test.ts.)
 */
describe('The movement gate: every outgoing movement passes the policies', () => {
  let app: TestApp;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  /** The key that creates the station and the consolidation rule: the actor of their automations. */
  let creator: { secret: string; id: string };
  let approverId: string;
  let wallet: { id: string; address: string };
  let station: { id: string; address: string; wallet_id: string };
  let sweepWallet: { id: string; address: string };
  let ruleId: string;
  const external = privateKeyToAccount(generatePrivateKey()).address;
  const taskQueue = `movement-gate-${randomUUID()}`;
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_SCAN_INTERVAL_SECONDS: '0.2', CHAIN_CONFIRMATIONS_ETHEREUM: '2' };

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });
  const ok = async (method: string, path: string, body?: unknown, key = org.secret) => {
    const response = await call(method, path, body, key);
    assert.ok(response.status >= 200 && response.status < 300, `${method} ${path}: ${response.status} ${response.text}`);
    return response.body;
  };
  const chainBalance = async (address: string) => (await app.deps.chains.provider('ethereum', 'sandbox')).balance(address, 'ETH');
  async function createWallet(name: string) {
    const vault = await ok('POST', '/v1/vaults', { name });
    const created = await ok('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.id, wallet_type: 'hot' });
    return { id: created.id as string, address: created.primary_address.address as string, vaultId: vault.id as string };
  }
  async function fund(walletId: string, address: string, amount: string, asset = 'ETH') {
    await ok('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address, asset, amount });
    await ok('POST', '/v1/sandbox/chains/ethereum/blocks', { count: 2 });
    await eventually(
      async () => {
        const rows = (await ok('GET', `/v1/wallets/${walletId}/balances`)).data as { asset_id: string; balance: string }[];
        return rows.some((row) => row.asset_id === asset && row.balance !== '0') ? true : undefined;
      },
      `${asset} credited to ${walletId}`,
      30_000,
      300,
    );
  }

  before(async () => {
    app = await startTestApp({ config });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Movement gate');
    await setRequiredApprovals(org.organizationId, 0);
    creator = await org.key(['*']);
    approverId = (await ok('POST', '/v1/members', { name: 'Ann', email: `ann-${randomUUID()}@example.com`, org_role: 'approver' })).id;

    wallet = await createWallet('Treasury');
    await fund(wallet.id, wallet.address, '50');
    await fund(wallet.id, wallet.address, '1000', 'USDC_ETH');
    const sweepSource = await createWallet('Collection');
    sweepWallet = sweepSource;
    await fund(sweepSource.id, sweepSource.address, '2');
    const destination = await createWallet('Cold');

    station = await ok('POST', '/v1/gas-stations', { name: 'Ethereum gas', chain: 'ethereum', threshold: '0', refill_amount: '0.5', refill_from_wallet_id: wallet.id }, creator.secret);
    await fund(station.wallet_id, station.address, '5');
    ruleId = (
      await ok(
        'POST',
        '/v1/consolidation/rules',
        { vault_id: sweepSource.vaultId, chain: 'ethereum', trigger_type: 'manual', destination_type: 'vault', destination_vault_id: destination.vaultId, gas_source: 'wallet', assets: [{ is_native: true }] },
        creator.secret,
      )
    ).id;
  });
  after(async () => {
    const client = (await localTemporal()).client;
    await terminateWorkflows(client, [...CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]), refillFlow.workflowId({ stationId: station.id })]);
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const send = (body: Record<string, unknown>): Promise<Outcome> => attempt('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: external, amount: '0.01', asset: 'ETH', ...body });
  async function attempt(method: string, path: string, body: unknown): Promise<Outcome> {
    const response = await call(method, path, body);
    if (response.status < 300) return { went: true, code: null };
    const error = response.body.error as { code: string; details?: { reason?: string } };
    // A station that cannot send the fuel answers sponsorship_unavailable naming why.
    return { went: false, code: error.code === 'sponsorship_unavailable' ? (error.details?.reason ?? error.code) : error.code };
  }

  /** Each kind: how it is attempted, and who the policies see behind it. */
  const KINDS: { operation: OperationType; actor: () => { type: string; id: string }; attempt: () => Promise<Outcome> }[] = [
    { operation: 'transfer', actor: () => ({ type: 'apikey', id: org.apiKeyId }), attempt: () => send({}) },
    { operation: 'sponsored_transfer', actor: () => ({ type: 'apikey', id: org.apiKeyId }), attempt: () => send({ asset: 'USDC_ETH', amount: '1', sponsor: true }) },
    // The fuel of a sponsored send, from the organization's own station: caused by the caller's key.
    { operation: 'fuel_send', actor: () => ({ type: 'system', id: org.apiKeyId }), attempt: () => send({ asset: 'USDC_ETH', amount: '1', sponsor: true }) },
    { operation: 'gas_refill', actor: () => ({ type: 'apikey', id: org.apiKeyId }), attempt: () => attempt('POST', `/v1/gas-stations/${station.id}/refill`, { source_wallet_id: wallet.id, amount: '0.01' }) },
    { operation: 'gas_auto_refill', actor: () => ({ type: 'system', id: creator.id }), attempt: autoRefill },
    // A manual run's sweeps: the key that asked for it.
    { operation: 'consolidation_sweep', actor: () => ({ type: 'system', id: org.apiKeyId }), attempt: sweep },
    { operation: 'sign', actor: () => ({ type: 'apikey', id: org.apiKeyId }), attempt: () => attempt('POST', `/v1/wallets/${wallet.id}/sign`, { payload: 'aa'.repeat(32), hash_function: 'keccak256' }) },
    { operation: 'sign_raw', actor: () => ({ type: 'apikey', id: org.apiKeyId }), attempt: () => attempt('POST', `/v1/wallets/${wallet.id}/sign`, { payload: 'aa'.repeat(32), hash_function: 'no_op' }) },
  ];

  /** Turns auto-refill on with a threshold above the station's balance; its workflow submits the refill, and the decision is read from the audit log. */
  async function autoRefill(): Promise<Outcome> {
    const since = new Date();
    await ok('PATCH', `/v1/gas-stations/${station.id}`, { auto_refill_enabled: true, threshold: '1000' }, creator.secret);
    const decision = await eventually(async () => (await decisionsOf('gas_auto_refill', since))[0], 'the automatic refill decided', 30_000, 200);
    await terminateWorkflows((await localTemporal()).client, [refillFlow.workflowId({ stationId: station.id })]);
    await ok('PATCH', `/v1/gas-stations/${station.id}`, { auto_refill_enabled: false, threshold: '0' }, creator.secret);
    return decision.allowed ? { went: true, code: null } : { went: false, code: CODE_OF_RESULT[decision.result]! };
  }

  /** A manual run of the consolidation rule, to its end (refused sweeps fail it) or its sweep submitted. */
  async function sweep(): Promise<Outcome> {
    const run = await ok('POST', `/v1/consolidation/rules/${ruleId}/runs`);
    const swept = await eventually(
      async () => {
        const sweeps = (await ok('GET', `/v1/consolidation/runs/${run.id}/sweeps`)).data as { status: string; failure_reason: string | null }[];
        return sweeps.find((one) => one.status !== 'planned');
      },
      'the sweep submitted or refused',
      30_000,
      200,
    );
    if (swept.status !== 'failed') return { went: true, code: null };
    // A refused sweep fails the run, which frees the rule for the next one.
    await eventually(async () => (['failed', 'partially_failed', 'completed'].includes((await ok('GET', `/v1/consolidation/runs/${run.id}`)).status) ? true : undefined), 'the run ended', 30_000, 200);
    return { went: false, code: swept.failure_reason };
  }

  const CODE_OF_RESULT: Record<string, string> = { rejected: 'policy_blocked', awaiting_approval: 'policy_approval_required' };

  async function auditOf(action: string, operation: OperationType, since: Date): Promise<{ entry: PolicyAuditLog; decision: Decision }[]> {
    const entries = await (await testOrm()).em.fork().find(PolicyAuditLog, { organization: org.organizationId, action, createdAt: { $gte: since } }, { orderBy: { createdAt: 'desc' } });
    return entries
      .map((entry) => {
        const metadata = entry.metadata as { decision?: { result: string; allowed: boolean }; request: Record<string, unknown>; actor_type: string };
        const decision = metadata.decision ?? { result: 'alert', allowed: true };
        return { entry, decision: { actor_id: entry.actorId, actor_type: metadata.actor_type, result: decision.result, allowed: decision.allowed, request: metadata.request } };
      })
      .filter(({ decision }) => decision.request.operation_type === operation);
  }
  const decisionsOf = async (operation: OperationType, since: Date) => (await auditOf('decision', operation, since)).map(({ decision }) => decision);

  /** One enforced policy: `rule` on the kind, then everything else allowed; the previous policy archived. */
  let enforced: string | undefined;
  async function enforce(operation: OperationType, action: Action, actor: { type: string; id: string }) {
    const onKind = { field: 'operation_type', operator: 'equal', value: operation };
    const rule = {
      block: { name: 'Block the kind', action_type: 'block', conditions: [onKind] },
      approval: {
        name: 'Approve the kind',
        action_type: 'require_approval',
        action_config: { approvers: [{ id: approverId, type: 'user' }], required_approvals: 1, expiry_hours: 4 },
        conditions: [onKind],
      },
      actor: {
        name: 'Block its actor',
        action_type: 'block',
        conditions: [onKind, { field: 'actor_type', operator: 'equal', value: actor.type }, { field: 'actor_id', operator: 'equal', value: actor.id }],
      },
      alert: { name: 'Alert on the kind', action_type: 'alert', conditions: [onKind] },
    }[action];
    const policy = await ok('POST', '/v1/policies', { name: `${operation} ${action}`, rules: [rule, { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'chain', operator: 'equal', value: 'ethereum' }] }] });
    await ok('POST', `/v1/policies/${policy.id}/activate`, {});
    if (enforced) await ok('DELETE', `/v1/policies/${enforced}`);
    enforced = policy.id;
  }

  const transactionsCount = async () => (await testOrm()).em.fork().count(OutgoingTransaction, { organization: org.organizationId });
  const balances = async () => Promise.all([wallet.address, station.address, sweepWallet.address].map(chainBalance));

  for (const kind of KINDS) {
    // Alert last: it lets the movement go, and a sweep then empties its vault.
    for (const action of ['block', 'approval', 'actor', 'alert'] as const) {
      it(`${kind.operation}: ${action === 'actor' ? 'a rule on its actor matches it' : action === 'alert' ? 'an alert rule lets it through and records the alert' : action === 'block' ? 'a block rule refuses it, nothing signed or sent' : 'an approval rule holds it'}`, async () => {
        const actor = kind.actor();
        await enforce(kind.operation, action, actor);
        const since = new Date();
        const [transactionsBefore, chainBefore] = [await transactionsCount(), await balances()];
        const outcome = await kind.attempt();
        const decisions = await decisionsOf(kind.operation, since);
        assert.ok(decisions.length >= 1, `the ${kind.operation} decision is audited`);
        const decision = decisions[0]!;
        assert.equal(decision.request.operation_type, kind.operation);
        assert.equal(decision.actor_type, actor.type === 'apikey' ? 'apikey' : 'system', 'the audit names the actor');
        assert.equal(decision.actor_id, actor.id);
        assert.equal(decision.request.actor_type, actor.type);
        assert.equal(decision.request.actor_id, actor.id);
        assert.equal(decision.request.is_automated, actor.type === 'system');

        if (action === 'alert') {
          assert.deepEqual(outcome, { went: true, code: null });
          assert.equal(decision.allowed, true);
          assert.equal((await auditOf('alert', kind.operation, since)).length, 1, 'the alert is recorded');
          return;
        }
        const expected = action === 'approval' ? 'policy_approval_required' : 'policy_blocked';
        assert.deepEqual(outcome, { went: false, code: expected });
        assert.equal(decision.allowed, false);
        // Refused: no transaction recorded, signed or broadcast, and nothing left any address.
        assert.equal(await transactionsCount(), transactionsBefore);
        assert.deepEqual(await balances(), chainBefore);
      });
    }
  }
});

/**
 * Prices fail closed: a live key with no Chainlink feeds configured (PRICE_FEEDS_LIVE) has no prices, so a send's
 * USD value is unknown. USD block and approval rules then apply as if their condition held, an allow
 * rule on USD does not, and the decision says price_unavailable. A live Ethereum node is anvil with
 * mainnet's chain id; the wallet's ledger is written directly, since the refused sends never reach
 * the chain.
 */
describe('The movement gate: USD rules fail closed without a price (live key, no price source)', () => {
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  let live: { secret: string; id: string };
  let walletId: string;
  const external = privateKeyToAccount(generatePrivateKey()).address;

  before(async () => {
    anvil = await startAnvil({ chainId: 1 });
    // Mainnet's token contracts are not on anvil: a 6-decimal one stands in for USDC, so that the node's tokens check out.
    app = await startTestApp({ config: { CHAIN_NODE_ETHEREUM_LIVE: anvil.url, CHAIN_TOKENS_ETHEREUM_LIVE: `USDC_ETH=${await deployAnvilToken(anvil)}` } });
    org = await createTestOrganization('Live without prices');
    await setRequiredApprovals(org.organizationId, 0);
    live = await org.key(['*'], 'live');
    const vault = await app.request('POST', '/v1/vaults', { key: live.secret, body: { name: 'Live treasury' } });
    const wallet = await app.request('POST', '/v1/wallets', { key: live.secret, body: { name: 'Live hot', chain: 'ethereum', vault_id: vault.body.id } });
    assert.equal(wallet.status, 201, wallet.text);
    walletId = wallet.body.id;
    await creditCustodyWallet((await testOrm()).em.fork(), walletId, 'ETH', 2000n * 10n ** 18n);
  });
  after(async () => {
    await app?.close();
    await anvil?.stop();
  });

  async function enforce(rules: unknown[]) {
    const policy = await app.request('POST', '/v1/policies', { key: live.secret, body: { name: `Live ${randomUUID()}`, rules } });
    assert.equal(policy.status, 201, policy.text);
    const activated = await app.request('POST', `/v1/policies/${policy.body.id}/activate`, { key: live.secret, body: {} });
    assert.equal(activated.status, 200, activated.text);
    return async () => assert.equal((await app.request('DELETE', `/v1/policies/${policy.body.id}`, { key: live.secret })).status, 200);
  }
  const send = (amount: string) => app.request('POST', '/v1/transactions', { key: live.secret, body: { wallet_id: walletId, to_address: external, amount, asset: 'ETH' } });
  const lastDecision = async () => {
    const [entry] = await (await testOrm()).em.fork().find(PolicyAuditLog, { organization: org.organizationId, environment: 'live', action: 'decision' }, { orderBy: { createdAt: 'desc' }, limit: 1 });
    return entry!.metadata as { decision: { result: string; price_unavailable?: boolean; reason: string }; request: Record<string, unknown> };
  };
  const catchAll = { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] };

  it('holds 1,000 ETH for approval under "approval above 10,000 USD" then a catch-all: nothing recorded or locked', async () => {
    const approverId = (await app.request('POST', '/v1/members', { key: live.secret, body: { name: 'Bo', email: `bo-${randomUUID()}@example.com`, org_role: 'approver' } })).body.id;
    const archive = await enforce([
      {
        name: 'Approval above 10,000 USD',
        action_type: 'require_approval',
        action_config: { approvers: [{ id: approverId, type: 'user' }], required_approvals: 1 },
        conditions: [{ field: 'amount_usd', operator: 'greater_than', value: '10000' }],
      },
      catchAll,
    ]);
    const held = await send('1000');
    assert.equal(held.status, 400, held.text);
    assert.equal(held.body.error.code, 'policy_approval_required');
    const { decision, request } = await lastDecision();
    assert.equal(decision.price_unavailable, true);
    assert.match(decision.reason, /price_unavailable/);
    assert.equal(request.price_unavailable, true);
    assert.equal(request.amount_usd, undefined, 'no USD value is invented');
    assert.equal(request.fee_raw !== undefined, true, 'the fee is judged too');
    assert.equal(await (await testOrm()).em.fork().count(OutgoingTransaction, { wallet: walletId }), 0);
    const [row] = await (await testOrm()).em.fork().find(WalletBalance, { wallet: walletId, assetId: 'ETH' });
    assert.equal(row!.locked, '0');
    await archive();
  });

  it('blocks under "block above 10,000 USD", and an allow rule on USD does not match a value it cannot know', async () => {
    let archive = await enforce([{ name: 'Block above 10,000 USD', action_type: 'block', conditions: [{ field: 'amount_usd', operator: 'greater_than', value: '10000' }] }, catchAll]);
    const blocked = await send('0.001');
    assert.equal(blocked.status, 403, blocked.text);
    assert.equal(blocked.body.error.code, 'policy_blocked');
    assert.equal((await lastDecision()).decision.price_unavailable, true);
    await archive();

    archive = await enforce([{ name: 'Small sends go', action_type: 'allow', conditions: [{ field: 'amount_usd', operator: 'less_than', value: '100' }] }]);
    const denied = await send('0.001');
    assert.equal(denied.status, 403, denied.text);
    assert.equal((await lastDecision()).decision.result, 'no_match', 'the allow rule did not match an unknown USD value: denied by default');
    await archive();
  });
});
