import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { creditCustodyWallet } from '../support/ledger';

/**
 * Velocity limits under concurrency: sends from different wallets do not wait on one another's
 * address locks, so without the organization's velocity lock each would read the history without
 * the others and more would pass than the limit admits. 50 concurrent sends from 5 sandbox Ethereum
 * wallets against "block once 10 were sent in the hour" admit exactly 10. No worker runs: the
 * accepted sends' workflows wait on a task queue of their own.
 */
describe('Velocity limits hold under concurrent sends', () => {
  let app: TestApp;
  let org: TestOrganization;
  const wallets: string[] = [];
  const external = privateKeyToAccount(generatePrivateKey()).address;

  before(async () => {
    app = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: `velocity-race-${randomUUID()}`, RATE_LIMIT_PER_SECOND: '1000', RATE_LIMIT_BURST: '1000' } });
    org = await createTestOrganization('Velocity race');
    await setRequiredApprovals(org.organizationId, 0);
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Treasury' } });
    for (let index = 0; index < 5; index += 1) {
      const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: `Hot ${index}`, chain: 'ethereum', vault_id: vault.body.id } });
      assert.equal(wallet.status, 201, wallet.text);
      wallets.push(wallet.body.id);
      await creditCustodyWallet((await testOrm()).em.fork(), wallet.body.id, 'ETH', 10n ** 18n);
    }
    const policy = await app.request('POST', '/v1/policies', {
      key: org.secret,
      body: {
        name: 'Ten sends an hour',
        category: 'velocity',
        rules: [
          { name: 'Ten an hour', action_type: 'block', conditions: [{ field: 'velocity_count_1h', operator: 'greater_than_or_equal', value: '10' }] },
          { name: 'Allow the rest', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] },
        ],
      },
    });
    const activated = await app.request('POST', `/v1/policies/${policy.body.id}/activate`, { key: org.secret, body: {} });
    assert.equal(activated.status, 200, activated.text);
  });
  after(async () => app?.close());

  it('admits exactly 10 of 50 concurrent sends from 5 wallets under "velocity_count_1h >= 10 -> block"', async () => {
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, index) =>
        app.request('POST', '/v1/transactions', { key: org.secret, body: { wallet_id: wallets[index % wallets.length], to_address: external, amount: '0.001', asset: 'ETH' } }),
      ),
    );
    const statuses = responses.map((response) => (response.status === 201 ? 'accepted' : `${response.status} ${response.body.error?.code}`));
    assert.equal(statuses.filter((status) => status === 'accepted').length, 10, statuses.join(', '));
    assert.equal(statuses.filter((status) => status === '403 policy_blocked').length, 40, statuses.join(', '));
    assert.equal(await (await testOrm()).em.fork().count(OutgoingTransaction, { organization: org.organizationId }), 10);
  });
});
