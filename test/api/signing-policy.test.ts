import assert from 'node:assert/strict';
import { Organization } from '../../src/organizations/entities';
import { PolicyAuditLog } from '../../src/policies/entities';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { testOrm } from '../support/environment';

/** Raw signing is decided by the enforced policies, as sends are. */
describe('Signing under enforced policies', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp();
  });
  after(() => app?.close());

  async function organizationWithPolicy(rules: unknown[] | ((approverId: string) => unknown[])) {
    const org = await createTestOrganization('Signing policies');
    await (await testOrm()).em.fork().nativeUpdate(Organization, { id: org.organizationId }, { policyActivationRequiredApprovals: 0 });
    const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
    const vault = await call('POST', '/v1/vaults', { name: 'Treasury' });
    const wallet = await call('POST', '/v1/wallets', { name: 'Hot', chain: 'ethereum', vault_id: vault.body.id });
    assert.equal(wallet.status, 201, wallet.text);
    const approver = await call('POST', '/v1/members', { name: 'Ann', email: `ann-${Date.now()}@example.com`, org_role: 'approver' });
    const policy = await call('POST', '/v1/policies', { name: 'Signing', rules: typeof rules === 'function' ? rules(approver.body.id) : rules });
    assert.equal(policy.status, 201, policy.text);
    const activated = await call('POST', `/v1/policies/${policy.body.id}/activate`, {});
    assert.equal(activated.status, 200, activated.text);
    return { org, call, walletId: wallet.body.id as string, policyId: policy.body.id as string };
  }

  const signRule = (name: string, action: Record<string, unknown>) => ({ name, ...action, conditions: [{ field: 'operation_type', operator: 'equal', value: 'sign' }] });
  const allowTransfers = { name: 'Allow transfers', action_type: 'allow', conditions: [{ field: 'operation_type', operator: 'equal', value: 'transfer' }] };

  it('blocks signing with 403 policy_blocked and signs nothing; the refusal is audited', async () => {
    const { org, call, walletId, policyId } = await organizationWithPolicy([signRule('No raw signing', { action_type: 'block' }), allowTransfers]);
    const refused = await call('POST', `/v1/wallets/${walletId}/sign`, { payload: 'aa'.repeat(32) });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.error.code, 'policy_blocked');
    assert.equal(refused.body.error.details.policy_id, policyId);
    const audit = await (await testOrm()).em.fork().find(PolicyAuditLog, { organization: org.organizationId, action: 'decision' });
    assert.equal(audit.length, 1);
    assert.equal((audit[0]!.metadata as { request: { operation_type: string } }).request.operation_type, 'sign');
  });

  it('holds signing for approval or delay with 400 and the decision details', async () => {
    const approval = await organizationWithPolicy((approverId) => [
      signRule('Approve signing', { action_type: 'require_approval', action_config: { approvers: [{ id: approverId, type: 'user' }], required_approvals: 1, expiry_hours: 4 } }),
    ]);
    const held = await approval.call('POST', `/v1/wallets/${approval.walletId}/sign`, { payload: 'aa'.repeat(32) });
    assert.equal(held.status, 400, held.text);
    assert.equal(held.body.error.code, 'policy_approval_required');
    assert.equal(held.body.error.details.required_approvals, 1);

    const delay = await organizationWithPolicy([signRule('Cool down', { action_type: 'delay', action_config: { delay_minutes: 30 } })]);
    const delayed = await delay.call('POST', `/v1/wallets/${delay.walletId}/sign`, { payload: 'aa'.repeat(32) });
    assert.equal(delayed.status, 400, delayed.text);
    assert.equal(delayed.body.error.code, 'policy_delay_required');
    assert.equal(delayed.body.error.details.delay_minutes, 30);
  });

  it('signs under an alert rule and under an allow rule', async () => {
    const alert = await organizationWithPolicy([signRule('Watch signing', { action_type: 'alert' })]);
    const signed = await alert.call('POST', `/v1/wallets/${alert.walletId}/sign`, { payload: 'aa'.repeat(32) });
    assert.equal(signed.status, 200, signed.text);
    assert.equal(signed.body.object, 'signature');
  });
});
