import assert from 'node:assert/strict';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';

describe('Chains and assets catalogue', () => {
  let app: TestApp;
  let sandbox: TestOrganization;

  before(async () => {
    app = await startTestApp();
    sandbox = await createTestOrganization();
  });
  after(() => app?.close());

  it('lists the four chains with the network of the key environment', async () => {
    const chains = await app.request('GET', '/v1/chains', { key: sandbox.secret });
    assert.equal(chains.status, 200);
    const networks = Object.fromEntries(chains.body.data.map((chain: { id: string; network: string }) => [chain.id, chain.network]));
    assert.deepEqual(networks, { bitcoin: 'testnet', ethereum: 'sepolia', tron: 'nile', solana: 'devnet' });

    const live = await createTestOrganization('Live', 'live');
    const ethereum = await app.request('GET', '/v1/chains/ethereum', { key: live.secret });
    assert.deepEqual(ethereum.body, {
      id: 'ethereum',
      object: 'chain',
      name: 'ethereum',
      networks: ['mainnet', 'sepolia'],
      network: 'mainnet',
      native_asset_id: 'ETH',
    });
    const missing = await app.request('GET', '/v1/chains/dogecoin', { key: sandbox.secret });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'resource_missing');
  });

  it('lists assets with their decimals at /assets and /v1/assets, filterable by chain', async () => {
    const all = await app.request('GET', '/assets', { key: sandbox.secret });
    const decimals = Object.fromEntries(all.body.data.map((asset: { id: string; decimals: number }) => [asset.id, asset.decimals]));
    assert.deepEqual(decimals, { BTC: 8, ETH: 18, USDC_ETH: 6, USDT_ETH: 6, TRX: 6, USDT_TRX: 6, SOL: 9, USDC_SOL: 6 });
    const tron = await app.request('GET', '/v1/assets?chain=tron', { key: sandbox.secret });
    assert.deepEqual(tron.body.data.map((asset: { id: string }) => asset.id), ['TRX', 'USDT_TRX']);
    assert.equal(tron.body.data[1].type, 'trc20');
    const bad = await app.request('GET', '/v1/assets?chain=dogecoin', { key: sandbox.secret });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'chain');
  });
});
