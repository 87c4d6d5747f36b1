import assert from 'node:assert/strict';
import type { EntityManager } from '@mikro-orm/postgresql';
import { secp256k1 } from '@noble/curves/secp256k1';
import { keccak256, toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

const rpc = (method: string, params: unknown[] = [], id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params });

describe('Devnet through the API (sandbox keys, no node configured)', () => {
  let app: TestApp;
  let sandbox: TestOrganization;

  before(async () => {
    app = await startTestApp();
    sandbox = await createTestOrganization('Devnet');
  });
  after(async () => {
    await app?.close();
  });

  const call = (body: unknown, chain = 'ethereum') => app.request('POST', `/v1/rpc/${chain}`, { key: sandbox.secret, body });

  it('answers the Ethereum pass-through from the devnet: chain id, a faucet-funded balance, a viem-signed transaction, -32601', async () => {
    const holder = privateKeyToAccount(toHex(secp256k1.utils.randomPrivateKey()));
    const em = (await testOrm()).em.fork() as EntityManager;
    await fundFromFaucet(em, 'ethereum', { to: holder.address, assetId: 'ETH', amount: 10n ** 17n });
    await mineDevnetBlocks(em, 'ethereum', 1);

    const [chainId, balance] = (await call([rpc('eth_chainId', [], 1), rpc('eth_getBalance', [holder.address, 'latest'], 2)])).body;
    assert.deepEqual(chainId, { jsonrpc: '2.0', id: 1, result: '0xaa36a7' });
    assert.deepEqual(balance, { jsonrpc: '2.0', id: 2, result: toHex(10n ** 17n) });

    const signed = await holder.signTransaction({
      type: 'eip1559', chainId: 11_155_111, nonce: 0, to: '0x000000000000000000000000000000000000dEaD', value: 1n, gas: 21_000n, maxFeePerGas: 10n ** 10n, maxPriorityFeePerGas: 10n ** 9n,
    });
    assert.deepEqual((await call(rpc('eth_sendRawTransaction', [signed], 3))).body, { jsonrpc: '2.0', id: 3, result: keccak256(signed) });
    const refused = (await call(rpc('eth_sendRawTransaction', [signed.replace(/..$/, '00')], 4))).body;
    assert.equal(refused.error.code, -32000);
    // Allowed for a real node, not answered by the devnet; and outside the allowlist altogether.
    assert.equal((await call(rpc('eth_getCode', [holder.address, 'latest'], 5))).body.error.code, -32601);
    assert.equal((await call(rpc('eth_accounts', [], 6))).body.error.code, -32601);
  });

  it('answers network fees from the devnet fee market', async () => {
    const fees = await app.request('GET', '/v1/chains/bitcoin/fees', { key: sandbox.secret });
    assert.equal(fees.status, 200, fees.text);
    assert.equal(fees.body.fee_unit, 'sat/vB');
    assert.ok(Number(fees.body.fees.high.fee_per_byte) >= Number(fees.body.fees.low.fee_per_byte));
    const live = await sandbox.key(['*'], 'live');
    assert.equal((await app.request('GET', '/v1/chains/bitcoin/fees', { key: live.secret })).status, 503);
  });
});
