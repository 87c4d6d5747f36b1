import assert from 'node:assert/strict';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

describe('Key custody: live refuses the development master key', () => {
  let app: TestApp;
  let org: TestOrganization;
  let liveKey: string;
  before(async () => {
    // No MASTER_KEY: the public development master key, as `npm start` without one runs.
    app = await startTestApp({ config: { MASTER_KEY: undefined } });
    org = await createTestOrganization('Weak custody');
    liveKey = (await org.key(['*'], 'live')).secret;
  });
  after(() => app?.close());

  it('answers every live key 503 key_custody_unconfigured in the error envelope, reads included', async () => {
    assert.equal(app.deps.keys.provider.development, true);
    for (const [method, path, body] of [
      ['GET', '/v1/wallets', undefined],
      ['GET', '/v1/vaults', undefined],
      ['POST', '/v1/vaults', { name: 'live' }],
      ['GET', '/v1/balances', undefined],
    ] as const) {
      const response = await app.request(method, path, { key: liveKey, body });
      assert.equal(response.status, 503, `${method} ${path}: ${response.text}`);
      assert.equal(response.body.error.code, 'key_custody_unconfigured');
      assert.equal(response.body.error.type, 'provider_error');
      assert.match(response.body.error.message, /MASTER_KEY/);
      assert.ok(response.body.error.request_id);
    }
  });

  it('keeps sandbox keys working on the development key', async () => {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'sandbox' } });
    assert.equal(vault.status, 201, vault.text);
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'w', chain: 'ethereum', vault_id: vault.body.id } });
    assert.equal(wallet.status, 201, wallet.text);
  });

  it('never makes or opens a live seed under it, whoever asks', async () => {
    const em = (await testOrm()).em.fork();
    const location = { chain: 'ethereum', testnet: false, coinType: 60, format: 'eip55', account: 0, index: 0 } as const;
    await assert.rejects(
      app.deps.keys.withKeys(em, org.organizationId, 'live', [location], ([key]) => key!.address),
      (error: Error & { code?: string }) => error.code === 'key_custody_unconfigured',
    );
    assert.equal(await em.count('OrganizationSeed', { organization: org.organizationId, environment: 'live' }), 0);
  });
});
