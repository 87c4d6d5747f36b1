import assert from 'node:assert/strict';
import { formatEther, formatGwei, parseGwei, toHex } from 'viem';
import { Money } from '../../src/shared/money';
import { ANVIL_ACCOUNT, startAnvil, type Anvil } from '../support/anvil';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';

/** The sandbox price table's default ether price (PRICE_TABLE_SANDBOX): what fee_usd is priced at. */
const SANDBOX_ETH_USD = '3000';

const rpc = (method: string, params: unknown[] = [], id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params });

describe('Chains on a real Ethereum node (anvil)', () => {
  let anvil: Anvil;
  let app: TestApp;
  let sandbox: TestOrganization;

  before(async () => {
    anvil = await startAnvil();
    app = await startTestApp({ config: { CHAIN_NODE_ETHEREUM_SANDBOX: anvil.url, CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID: '31337' } });
    sandbox = await createTestOrganization('Chains');
  });
  after(async () => {
    await app?.close();
    await anvil?.stop();
  });

  const call = (body: unknown, key = sandbox.secret, chain = 'ethereum') => app.request('POST', `/v1/rpc/${chain}`, { key, body });

  describe('POST /v1/rpc/:chain', () => {
    it("returns anvil's own answers: eth_chainId 0x7a69, eth_blockNumber, eth_getBalance of a dev account", async () => {
      const chainId = await call(rpc('eth_chainId', [], 'a'));
      assert.equal(chainId.status, 200);
      assert.deepEqual(chainId.body, { jsonrpc: '2.0', id: 'a', result: '0x7a69' });

      const blockNumber = await call(rpc('eth_blockNumber', [], 2));
      assert.deepEqual(blockNumber.body, { jsonrpc: '2.0', id: 2, result: await anvil.call('eth_blockNumber') });

      const balance = await call(rpc('eth_getBalance', [ANVIL_ACCOUNT, 'latest'], 3));
      assert.equal(balance.body.result, await anvil.call('eth_getBalance', [ANVIL_ACCOUNT, 'latest']));
      assert.ok(BigInt(balance.body.result as string) > 0n);
    });

    it('answers each call of a batch in order, ids preserved, a disallowed method refused with -32601', async () => {
      const batch = await call([rpc('eth_chainId', [], 10), rpc('anvil_setBalance', [ANVIL_ACCOUNT, '0x0'], 'x'), rpc('net_version', [], 12)]);
      assert.equal(batch.status, 200);
      assert.equal(batch.body.length, 3);
      assert.deepEqual(batch.body[0], { jsonrpc: '2.0', id: 10, result: '0x7a69' });
      assert.equal(batch.body[1].id, 'x');
      assert.equal(batch.body[1].error.code, -32601);
      assert.equal(batch.body[1].result, undefined);
      assert.deepEqual(batch.body[2], { jsonrpc: '2.0', id: 12, result: '31337' });
      assert.notEqual(await anvil.call('eth_getBalance', [ANVIL_ACCOUNT, 'latest']), '0x0', 'the refused call never reached anvil');
    });

    it('answers a notification, and a batch of notifications, with 204 and no body', async () => {
      const single = await call({ jsonrpc: '2.0', method: 'eth_blockNumber', params: [] });
      assert.equal(single.status, 204);
      assert.equal(single.text, '');
      const batch = await call([
        { jsonrpc: '2.0', method: 'eth_chainId' },
        { jsonrpc: '2.0', method: 'anvil_mine' },
      ]);
      assert.equal(batch.status, 204);
      assert.equal(batch.text, '');
      const mixed = await call([{ jsonrpc: '2.0', method: 'eth_chainId' }, rpc('eth_chainId', [], 7)]);
      assert.deepEqual(mixed.body, [{ jsonrpc: '2.0', id: 7, result: '0x7a69' }]);
    });

    it('answers protocol errors as JSON-RPC error objects: -32700 with id null, -32600, -32602', async () => {
      const invalidJson = await app.request('POST', '/v1/rpc/ethereum', { key: sandbox.secret, rawBody: '{"jsonrpc": "2.0", "method"', headers: { 'content-type': 'application/json' } });
      assert.equal(invalidJson.status, 200);
      assert.equal(invalidJson.body.id, null);
      assert.equal(invalidJson.body.error.code, -32700);
      assert.equal(invalidJson.body.jsonrpc, '2.0');

      const emptyObject = await call({});
      assert.equal(emptyObject.body.error.code, -32600);
      assert.equal(emptyObject.body.id, null);
      const emptyBatch = await call([]);
      assert.ok(!Array.isArray(emptyBatch.body), 'an empty batch gets a single error object');
      assert.equal(emptyBatch.body.error.code, -32600);

      const invalidEntries = await call([1, { jsonrpc: '1.0', method: 'eth_chainId', id: 5 }, { jsonrpc: '2.0', method: 7, id: 6 }, { jsonrpc: '2.0', method: 'eth_chainId', params: 'x', id: 8 }]);
      assert.deepEqual(invalidEntries.body.map((entry: { id: unknown; error: { code: number } }) => [entry.id, entry.error.code]), [[null, -32600], [5, -32600], [6, -32600], [8, -32600]]);

      const namedParams = await call({ jsonrpc: '2.0', method: 'eth_getBalance', params: { address: ANVIL_ACCOUNT }, id: 9 });
      assert.equal(namedParams.body.error.code, -32602);
    });

    it('refuses anvil_mine with -32601 and anvil is not touched', async () => {
      const before = await anvil.call('eth_blockNumber');
      const refused = await call(rpc('anvil_mine', ['0x5'], 4));
      assert.equal(refused.status, 200);
      assert.equal(refused.body.id, 4);
      assert.equal(refused.body.error.code, -32601);
      for (const method of ['eth_sendTransaction', 'eth_sign', 'personal_sign', 'debug_traceTransaction', 'eth_accounts']) {
        assert.equal((await call(rpc(method, []))).body.error.code, -32601, method);
      }
      assert.equal(await anvil.call('eth_blockNumber'), before);
    });

    it('keeps the REST answers for the key: 401, 403 without rpc:call, 404 for an unknown chain', async () => {
      const unauthenticated = await app.request('POST', '/v1/rpc/ethereum', { body: rpc('eth_chainId') });
      assert.equal(unauthenticated.status, 401);
      const readOnly = await sandbox.key(['custody:read']);
      const forbidden = await call(rpc('eth_chainId'), readOnly.secret);
      assert.equal(forbidden.status, 403);
      assert.equal(forbidden.body.error.code, 'insufficient_scope');
      assert.equal(forbidden.body.error.details.required_scope, 'rpc:call');
      const rpcOnly = await sandbox.key(['rpc:call']);
      assert.equal((await call(rpc('eth_chainId'), rpcOnly.secret)).body.result, '0x7a69');
      const unknown = await call(rpc('eth_chainId'), sandbox.secret, 'dogecoin');
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.error.code, 'resource_missing');
    });

    it('answers -32603 naming the chain and network when the environment has no node', async () => {
      const live = await sandbox.key(['*'], 'live');
      const answer = await call(rpc('eth_chainId', [], 1), live.secret);
      assert.equal(answer.status, 200);
      assert.deepEqual(answer.body, { jsonrpc: '2.0', id: 1, error: { code: -32603, message: 'no node is configured for ethereum mainnet' } });
      const bitcoin = await call(rpc('getblockcount', [], 2), live.secret, 'bitcoin');
      assert.deepEqual(bitcoin.body, { jsonrpc: '2.0', id: 2, error: { code: -32603, message: 'no node is configured for bitcoin mainnet' } });
      // Sandbox keys on a chain with no node are answered by the embedded devnet (test/chains/devnet-routes.test.ts).
      const devnet = await call(rpc('getblockcount', [], 3), sandbox.secret, 'bitcoin');
      assert.equal(typeof devnet.body.result, 'number');
      assert.doesNotMatch(JSON.stringify(answer.body), /127\.0\.0\.1/);
    });
  });

  describe('GET /v1/chains/:chain/fees', () => {
    it("answers low, medium and high from anvil's fee market, exact decimal strings", async () => {
      // Two blocks, each with three transfers tipping 1, 2 and 3 gwei: the 10th, 50th and 90th percentiles.
      await anvil.call('evm_setAutomine', [false]);
      for (let block = 0; block < 2; block++) {
        for (const tip of ['1', '2', '3']) {
          await anvil.call('eth_sendTransaction', [
            { from: ANVIL_ACCOUNT, to: '0x000000000000000000000000000000000000dEaD', value: '0x1', gas: toHex(21_000), maxFeePerGas: toHex(parseGwei('100')), maxPriorityFeePerGas: toHex(parseGwei(tip)) },
          ]);
        }
        await anvil.call('evm_mine');
      }
      await anvil.call('evm_setAutomine', [true]);
      const history = (await anvil.call('eth_feeHistory', ['0x14', 'latest', [10, 50, 90]])) as { baseFeePerGas: string[] };
      const baseFee = BigInt(history.baseFeePerGas.at(-1)!);

      const fees = await app.request('GET', '/v1/chains/ethereum/fees', { key: sandbox.secret });
      assert.equal(fees.status, 200, fees.text);
      const tier = (tip: string) => {
        const gasPrice = baseFee + parseGwei(tip);
        return { base_fee: formatGwei(baseFee), priority_fee: tip, gas_price: formatGwei(gasPrice), fee_per_byte: null, network_fee: formatEther(gasPrice * 21_000n), fee_usd: new Money(formatEther(gasPrice * 21_000n)).times(SANDBOX_ETH_USD).toFixed() };
      };
      assert.deepEqual(
        { ...fees.body, fees: Object.fromEntries(Object.entries(fees.body.fees as Record<string, Record<string, unknown>>).map(([level, { confirmation_time_secs, ...rest }]) => [level, rest])) },
        { object: 'network_fee', asset_id: 'ETH', chain: 'ethereum', symbol: 'ETH', fee_unit: 'gwei', fees: { low: tier('1'), medium: tier('2'), high: tier('3') } },
      );
      assert.ok(fees.body.fees.high.confirmation_time_secs <= fees.body.fees.low.confirmation_time_secs);
    });

    it('answers 503 chain_node_unavailable when the environment has no node', async () => {
      const live = await sandbox.key(['*'], 'live');
      const fees = await app.request('GET', '/v1/chains/ethereum/fees', { key: live.secret });
      assert.equal(fees.status, 503);
      assert.equal(fees.body.error.type, 'provider_error');
      assert.equal(fees.body.error.code, 'chain_node_unavailable');
      assert.equal(fees.body.error.details.reason, 'not_configured');
    });
  });

  it('leaves a chain whose node is on the wrong network unavailable instead of serving it', async () => {
    const mismatched = await startTestApp({ config: { CHAIN_NODE_ETHEREUM_SANDBOX: anvil.url, CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID: '11155111' } });
    try {
      await mismatched.deps.chains.checkAll();
      const answer = await mismatched.request('POST', '/v1/rpc/ethereum', { key: sandbox.secret, body: rpc('eth_chainId') });
      assert.equal(answer.body.error.code, -32603);
      const fees = await mismatched.request('GET', '/v1/chains/ethereum/fees', { key: sandbox.secret });
      assert.equal(fees.status, 503);
      assert.equal(fees.body.error.details.reason, 'network_mismatch');
    } finally {
      await mismatched.close();
    }
  });
});
