import assert from 'node:assert/strict';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../../src/api-keys/entities';
import { Address } from '../../src/custody/entities';
import { Organization } from '../../src/organizations/entities';
import { createMember } from '../../src/organizations/service';
import { PolicyAuditLog } from '../../src/policies/entities';
import { decideTransaction } from '../../src/policies/decisions';
import type { PolicyActor } from '../../src/policies/service';
import { OutgoingTransaction, type TransactionStatus } from '../../src/transactions/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

const MINUTE = 60_000;
const allowRest = { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount_usd', operator: 'greater_than_or_equal', value: '0' }] };
const toAddress = (value: string) => ({ field: 'to_address', operator: 'equal', value });

/** What the recorded requests carry as their velocity: absurd on purpose, so a replay that used them would block everything. */
const RECORDED_VELOCITY = { velocity_amount_usd_24h: '999999', velocity_amount_usd_1h: '999999', velocity_count_24h: '999', velocity_count_1h: '999' };

interface TestWallet {
  id: string;
  addressId: string;
  organizationId: string;
  environment: Environment;
  apiKeyId: string;
}

describe('Policy simulation over past transactions', () => {
  let app: TestApp;
  let org: TestOrganization;
  let live: { secret: string; id: string };
  let wallet: TestWallet;
  let otherWallet: TestWallet;
  let liveWallet: TestWallet;
  // Ten minutes aligned, three days back: the window [T, T + 4 h).
  const T = new Date(Math.floor((Date.now() - 3 * 86_400_000) / 600_000) * 600_000);
  const at = (minutes: number) => new Date(T.getTime() + minutes * MINUTE);
  const window = { from: at(0).toISOString(), to: at(240).toISOString() };
  const ids: Record<string, string> = {};
  let draftId: string;

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });

  async function createWallet(o: { organizationId: string; secret: string; apiKeyId: string }, environment: Environment, name: string): Promise<TestWallet> {
    const vault = await call('POST', '/v1/vaults', { name: `${name} vault` }, o.secret);
    assert.equal(vault.status, 201, vault.text);
    const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.body.id }, o.secret);
    assert.equal(created.status, 201, created.text);
    const em = (await testOrm()).em.fork();
    const address = await em.findOneOrFail(Address, { wallet: created.body.id, isPrimary: true });
    return { id: created.body.id, addressId: address.id, organizationId: o.organizationId, environment, apiKeyId: o.apiKeyId };
  }

  /** A send as the send path records it: the request decided (with its velocity as it was then) and the decision. */
  async function insertTransaction(w: TestWallet, when: Date, usd: string, options: { to?: string; status?: TransactionStatus; em?: EntityManager } = {}): Promise<string> {
    const em = options.em ?? (await testOrm()).em.fork();
    const to = options.to ?? '0x00000000000000000000000000000000000000aa';
    const tx = em.create(OutgoingTransaction, {
      organization: em.getReference(Organization, w.organizationId),
      environment: w.environment,
      wallet: w.id,
      chain: 'ethereum',
      network: w.environment === 'live' ? 'mainnet' : 'sepolia',
      assetId: 'ETH',
      fromAddress: w.addressId,
      toAddress: to,
      amount: '1000000000000000',
      recipientAmount: '1000000000000000',
      feeLimit: '21000000000000',
      feeTerms: { model: 'eip1559', gasLimit: '21000', maxFeePerGas: '1000000000', maxPriorityFeePerGas: '1000000' },
      feeLevel: 'medium',
      lockedAmount: '1000000000000000',
      lockedFee: '21000000000000',
      status: options.status ?? 'confirmed',
      requiredConfirmations: 12,
      amountUsd: usd,
      policyRequest: { amount: '0.001', amount_usd: usd, asset_symbol: 'ETH', chain: 'ethereum', wallet_id: w.id, to_address: to, ...RECORDED_VELOCITY },
      policyDecision: { result: 'matched_rule', policy_id: null, rule_id: null, action: 'allow' },
      apiKeyId: w.apiKeyId,
      // Defaults of the entity that its type does not mark optional.
      gross: false,
      fillFeeFromUnselected: false,
      note: '',
      confirmations: 12,
      createdAt: when,
      updatedAt: when,
    });
    if (!options.em) await em.flush();
    return tx.id;
  }

  /** A request decided by the enforced policies through decideTransaction, its audit entry moved to `when`. */
  async function decide(w: TestWallet, when: Date, usd: string, to: string): Promise<{ refused: boolean; auditId: string }> {
    const em = (await testOrm()).em.fork();
    const actor: PolicyActor = { organizationId: w.organizationId, environment: w.environment, id: w.apiKeyId, name: 'Root key', type: 'apikey' };
    const request = { amount: '0.001', amount_usd: usd, asset_symbol: 'ETH', chain: 'ethereum', wallet_id: w.id, to_address: to, ...RECORDED_VELOCITY };
    const refused = await decideTransaction(em, request, actor).then(
      async () => (await em.flush(), false),
      (error: { code?: string }) => {
        assert.match(error.code ?? '', /^policy_(blocked|approval_required|delay_required)$/);
        return true;
      },
    );
    const entry = await em.fork().findOneOrFail(PolicyAuditLog, { organization: w.organizationId, action: 'decision' }, { orderBy: { createdAt: 'desc', id: 'desc' } });
    await em.fork().nativeUpdate(PolicyAuditLog, { id: entry.id }, { createdAt: when });
    return { refused, auditId: entry.id };
  }

  async function enforce(rules: unknown[]): Promise<string> {
    const policy = await call('POST', '/v1/policies', { name: 'Policy', rules });
    assert.equal(policy.status, 201, policy.text);
    const activated = await call('POST', `/v1/policies/${policy.body.id}/activate`, {});
    assert.equal(activated.status, 200, activated.text);
    return policy.body.id;
  }

  const simulate = (body: Record<string, unknown>, policyId = draftId, key = org.secret) => call('POST', `/v1/policies/${policyId}/simulate`, body, key);

  before(async () => {
    app = await startTestApp();
    org = await createTestOrganization('What-if');
    await (await testOrm()).em.fork().nativeUpdate(Organization, { id: org.organizationId }, { policyActivationRequiredApprovals: 0 });
    live = await org.key(['*'], 'live');
    wallet = await createWallet(org, 'sandbox', 'Main');
    otherWallet = await createWallet(org, 'sandbox', 'Other');
    liveWallet = await createWallet({ organizationId: org.organizationId, secret: live.secret, apiKeyId: live.id }, 'live', 'Live');

    const em = (await testOrm()).em.fork();
    const approver = await createMember(em, em.getReference(Organization, org.organizationId), { name: 'Ada', email: 'ada@example.com', org_role: 'approver' });
    await em.flush();
    // What was enforced at the time (and still is): big amounts and one address blocked, another delayed, a third held for approval.
    const current = await enforce([
      { name: 'Block above $5000', action_type: 'block', conditions: [{ field: 'amount_usd', operator: 'greater_than', value: '5000' }] },
      { name: 'Blocked address', action_type: 'block', conditions: [toAddress('blocked-addr')] },
      { name: 'Cool down', action_type: 'delay', action_config: { delay_minutes: 60 }, conditions: [toAddress('delay-me')] },
      { name: 'Ask Ada', action_type: 'require_approval', action_config: { approvers: [{ id: approver.id, type: 'user' }], required_approvals: 1 }, conditions: [toAddress('approve-me')] },
      allowRest,
    ]);
    // The draft replaces it (a copy, its rules swapped): a $1000 cap and $500 an hour.
    const draft = await call('POST', '/v1/policies', { source_policy_id: current, name: 'Tighter' });
    assert.equal(draft.status, 201, draft.text);
    draftId = draft.body.id;
    for (const rule of draft.body.rules) assert.equal((await call('DELETE', `/v1/policies/${draftId}/rules/${rule.id}`)).status, 200);
    for (const rule of [
      { name: 'Block above $1000', action_type: 'block', conditions: [{ field: 'amount_usd', operator: 'greater_than', value: '1000' }] },
      { name: 'At most $500 an hour', action_type: 'block', conditions: [{ field: 'velocity_amount_usd_1h', operator: 'greater_than', value: '500' }] },
      allowRest,
    ]) {
      assert.equal((await call('POST', `/v1/policies/${draftId}/rules`, rule)).status, 201);
    }

    // The past, minutes from T (t0 is the day before the window; t7 after it).
    ids.t0 = await insertTransaction(wallet, at(-120), '50');
    ids.t1 = await insertTransaction(wallet, at(0), '300');
    ids.failed = await insertTransaction(wallet, at(2), '400', { status: 'failed' });
    ids.t2 = await insertTransaction(wallet, at(5), '2000');
    ids.t3 = await insertTransaction(otherWallet, at(10), '300');
    ids.t4 = await insertTransaction(wallet, at(15), '100');
    const r1 = await decide(wallet, at(20), '400', 'delay-me');
    const allowedDecision = await decide(wallet, at(30), '10', '0x00000000000000000000000000000000000000bb');
    ids.t5 = await insertTransaction(wallet, at(61), '100');
    const r2 = await decide(wallet, at(150), '6000', '0x00000000000000000000000000000000000000cc');
    const r3 = await decide(wallet, at(180), '200', 'blocked-addr');
    ids.t6 = await insertTransaction(wallet, at(190), '50');
    const r4 = await decide(wallet, at(200), '30', 'approve-me');
    ids.t7 = await insertTransaction(wallet, at(250), '50');
    assert.deepEqual([r1.refused, allowedDecision.refused, r2.refused, r3.refused, r4.refused], [true, false, true, true, true]);
    Object.assign(ids, { r1: r1.auditId, r2: r2.auditId, r3: r3.auditId, r4: r4.auditId });

    // Elsewhere in the same window: the live environment, and another organization.
    ids.live = await insertTransaction(liveWallet, at(1), '70');
    const other = await createTestOrganization('Someone else');
    ids.foreign = await insertTransaction(await createWallet(other, 'sandbox', 'Theirs'), at(3), '80');
  });
  after(() => app?.close());

  it('replays the window: draft and actual outcomes, the transition matrix, changes and the USD stopped and released', async () => {
    const response = await simulate({ history: window, example_limit: 8 });
    assert.equal(response.status, 200, response.text);
    const report = response.body;
    assert.equal(report.object, 'policy_history_simulation');
    assert.deepEqual(report.window, { ...window, wallet_id: null, include_refused: true });
    // t1 failed t2 t3 t4 t5 t6 and the refusals r1 r2 r3 r4; not t0 (before), t7 (after), the allowed decision (it is a transaction's), live or foreign.
    assert.deepEqual([report.total, report.transactions, report.refused_requests], [11, 7, 4]);
    assert.deepEqual([report.allowed, report.blocked, report.held_for_approval, report.delayed], [7, 4, 0, 0]);
    assert.deepEqual(report.actual, { allowed: 7, blocked: 2, held_for_approval: 1, delayed: 1 });
    assert.deepEqual(report.transitions, {
      allowed: { allowed: 5, blocked: 2, held_for_approval: 0, delayed: 0 },
      blocked: { allowed: 1, blocked: 1, held_for_approval: 0, delayed: 0 },
      held_for_approval: { allowed: 1, blocked: 0, held_for_approval: 0, delayed: 0 },
      delayed: { allowed: 0, blocked: 1, held_for_approval: 0, delayed: 0 },
    });
    assert.equal(report.changed, 5);
    // The policies enforced now would have allowed t2 and t4, delayed r1, blocked r3 and held r4.
    assert.equal(report.changed_from_current, 5);
    assert.deepEqual(report.usd, { stopped: '2100', released: '230', unpriced_changes: 0 });

    const refs = (examples: { transaction_id: string | null; audit_log_id: string | null }[]) => examples.map((e) => e.transaction_id ?? e.audit_log_id);
    // Changed first, in time order, then unchanged.
    assert.deepEqual(refs(report.examples.blocked), [ids.t2, ids.t4, ids.r1, ids.r2]);
    assert.deepEqual(refs(report.examples.allowed), [ids.r3, ids.r4, ids.t1, ids.failed, ids.t3, ids.t5, ids.t6]);
    assert.deepEqual([report.examples.held_for_approval, report.examples.delayed], [[], []]);

    const [t2, t4, r1] = report.examples.blocked;
    assert.deepEqual(
      { ...t2, velocity: undefined, draft: { ...t2.draft, policy_id: undefined, rule_id: undefined } },
      {
        source: 'transaction',
        transaction_id: ids.t2,
        audit_log_id: null,
        created_at: at(5).toISOString(),
        wallet_id: wallet.id,
        status: 'confirmed',
        asset_id: 'ETH',
        asset_symbol: 'ETH',
        amount: '0.001',
        amount_raw: '1000000000000000',
        amount_usd: '2000',
        to_address: '0x00000000000000000000000000000000000000aa',
        actual: { outcome: 'allowed', result: 'matched_rule', policy_id: null, rule_id: null },
        draft: { outcome: 'blocked', result: 'rejected', policy_id: undefined, rule_id: undefined, rule_name: 'Block above $1000', reason: "Blocked by rule 'Block above $1000'" },
        changed: true,
        velocity: undefined,
      },
    );
    assert.equal(t2.draft.policy_id, draftId);
    assert.equal(t4.draft.rule_name, 'At most $500 an hour');
    assert.deepEqual([r1.source, r1.transaction_id, r1.status, r1.to_address, r1.amount_usd], ['refused_request', null, null, 'delay-me', '400']);
    assert.equal(r1.actual.outcome, 'delayed');
    assert.equal(r1.actual.result, 'delayed');
    const r4 = report.examples.allowed[1];
    assert.deepEqual([r4.actual.outcome, r4.actual.result, r4.draft.outcome, r4.draft.rule_name], ['held_for_approval', 'awaiting_approval', 'allowed', 'Allow the rest']);
    // Fewer examples than there are: the changed ones are kept.
    const few = (await simulate({ history: window, example_limit: 1 })).body.examples;
    assert.deepEqual([refs(few.allowed), refs(few.blocked)], [[ids.r3], [ids.t2]]);
  });

  it('recomputes velocity from history as the draft would have seen it: refused sends do not count, released ones do, failed ones never', async () => {
    const report = (await simulate({ history: window, example_limit: 8 })).body;
    const velocityOf = (id: string) => {
      const example = [...report.examples.allowed, ...report.examples.blocked].find((e: { transaction_id: string | null; audit_log_id: string | null }) => (e.transaction_id ?? e.audit_log_id) === id);
      const v = example.velocity;
      return [v.velocity_amount_usd_1h, v.velocity_count_1h, v.velocity_amount_usd_24h, v.velocity_count_24h];
    };
    // t1 at T: only t0 (the day before, counted as it happened) in the last 24 h.
    assert.deepEqual(velocityOf(ids.t1), ['0', '0', '50', '1']);
    // t3: t1 only. The failed send never counts; t2 would have been blocked, so it was never sent.
    assert.deepEqual(velocityOf(ids.t3), ['300', '1', '350', '2']);
    // t4: t1 and t3 (another wallet: velocity is organization-wide) make $600, over the hourly $500.
    assert.deepEqual(velocityOf(ids.t4), ['600', '2', '650', '3']);
    // t5 an hour later: t1 has left the hour; t4 and r1 were blocked by the draft.
    assert.deepEqual(velocityOf(ids.t5), ['300', '1', '650', '3']);
    // t6: r3 was refused at the time, but the draft lets it through, so it counts.
    assert.deepEqual(velocityOf(ids.t6), ['200', '1', '950', '5']);
  });

  it("reports one wallet's requests with velocity still organization-wide, and can leave out the refusals", async () => {
    const forWallet = (await simulate({ history: { ...window, wallet_id: wallet.id } })).body;
    assert.equal(forWallet.window.wallet_id, wallet.id);
    // t3 (the other wallet) is not reported, yet its $300 still blocks t4.
    assert.deepEqual([forWallet.total, forWallet.transactions, forWallet.allowed, forWallet.blocked], [10, 6, 6, 4]);
    assert.equal(forWallet.transitions.allowed.blocked, 2);

    const noRefusals = (await simulate({ history: { ...window, include_refused: false }, example_limit: 6 })).body;
    assert.deepEqual([noRefusals.total, noRefusals.refused_requests, noRefusals.allowed, noRefusals.blocked, noRefusals.changed], [7, 0, 5, 2, 2]);
    assert.deepEqual(noRefusals.actual, { allowed: 7, blocked: 0, held_for_approval: 0, delayed: 0 });
    assert.deepEqual(noRefusals.usd, { stopped: '2100', released: '0', unpriced_changes: 0 });
    // Without r3 replayed, nothing was sent in the hour before t6.
    const t6 = noRefusals.examples.allowed.find((e: { transaction_id: string }) => e.transaction_id === ids.t6);
    assert.equal(t6.velocity.velocity_amount_usd_1h, '0');
  });

  it('keeps environments and organizations apart (a live transaction never appears in a sandbox simulation, nor the reverse) and needs custody:read', async () => {
    const liveDraft = await call('POST', '/v1/policies', { name: 'Live draft', rules: [allowRest] }, live.secret);
    assert.equal(liveDraft.status, 201, liveDraft.text);
    const liveReport = (await simulate({ history: window }, liveDraft.body.id, live.secret)).body;
    assert.deepEqual([liveReport.total, liveReport.transactions, liveReport.refused_requests], [1, 1, 0]);
    assert.equal(liveReport.examples.allowed[0].transaction_id, ids.live);
    // Nothing was enforced in live, so it was allowed then and is allowed now.
    assert.deepEqual([liveReport.changed, liveReport.changed_from_current], [0, 0]);

    // The sandbox report above counted neither the live transaction nor the other organization's; a wallet of the other environment is unknown.
    const wrongWallet = await simulate({ history: { ...window, wallet_id: liveWallet.id } });
    assert.deepEqual([wrongWallet.status, wrongWallet.body.error.code, wrongWallet.body.error.param], [404, 'resource_missing', 'history.wallet_id']);
    assert.equal((await simulate({ history: { ...window, wallet_id: 'not-a-uuid' } })).status, 404);
    // The report shows transactions: policies:read alone does not do.
    const policiesOnly = await org.key(['policies:read']);
    const forbidden = await simulate({ history: window }, draftId, policiesOnly.secret);
    assert.deepEqual([forbidden.status, forbidden.body.error.code, forbidden.body.error.details.required_scope], [403, 'insufficient_scope', 'custody:read']);
    assert.equal((await simulate({ requests: [{ amount_usd: '1' }] }, draftId, policiesOnly.secret)).status, 200);
    assert.equal((await simulate({ history: window }, draftId, (await org.key(['policies:read', 'custody:read'])).secret)).status, 200);
    // The sandbox draft itself is not the live key's to simulate.
    assert.equal((await simulate({ history: window }, draftId, live.secret)).status, 404);
  });

  it('pages through more than a page of transactions sharing one instant, and slides the day past a thousand sends', async () => {
    const busy = await createTestOrganization('Busy');
    const busyWallet = await createWallet(busy, 'sandbox', 'Busy');
    const start = at(-2 * 24 * 60);
    const em = (await testOrm()).em.fork();
    const batch = async (when: Date, count: number) => {
      for (let i = 0; i < count; i += 1) await insertTransaction(busyWallet, when, '1', { em });
      await em.flush();
    };
    await batch(start, 1100);
    await batch(new Date(start.getTime() + 25 * 60 * MINUTE), 5);
    const draft = await call(
      'POST',
      '/v1/policies',
      { name: 'A thousand a day', rules: [{ name: 'Cap', action_type: 'block', conditions: [{ field: 'velocity_count_24h', operator: 'greater_than_or_equal', value: '1000' }] }, allowRest] },
      busy.secret,
    );
    const report = (await simulate({ history: { from: start.toISOString(), to: new Date(start.getTime() + 26 * 60 * MINUTE).toISOString() } }, draft.body.id, busy.secret)).body;
    // The first thousand of the instant pass, the next hundred meet the cap; a day later the window is empty again.
    assert.deepEqual([report.total, report.allowed, report.blocked, report.changed], [1105, 1005, 100, 100]);
    assert.equal(report.usd.stopped, '100');
  });

  it('takes exactly one of requests and history, and a window of at most 90 days', async () => {
    const refused = async (body: Record<string, unknown>) => {
      const response = await simulate(body);
      assert.deepEqual([response.status, response.body.error?.code], [400, 'validation_failed'], JSON.stringify(body));
    };
    await refused({});
    await refused({ requests: [{ amount: '1' }], history: window });
    await refused({ history: { ...window, to: window.from } });
    await refused({ history: { from: window.to, to: window.from } });
    await refused({ history: { from: at(0).toISOString(), to: new Date(T.getTime() + 90 * 86_400_000 + 1).toISOString() } });
    await refused({ history: { from: 'yesterday', to: window.to } });
    await refused({ history: { ...window, extra: true } });
    const ninetyDays = await simulate({ history: { from: new Date(T.getTime() - 89 * 86_400_000).toISOString(), to: at(240).toISOString() } });
    assert.equal(ninetyDays.status, 200, ninetyDays.text);
    // t0 is inside this window.
    assert.equal(ninetyDays.body.total, 12);
    // The requests mode answers as before.
    const requests = await simulate({ requests: [{ amount_usd: '2000' }, { amount_usd: '10' }] });
    assert.deepEqual([requests.body.object, requests.body.allowed, requests.body.blocked], ['policy_simulation', 1, 1]);
  });
});
