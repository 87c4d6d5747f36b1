import assert from 'node:assert/strict';
import { ed25519 } from '@noble/curves/ed25519';
import { secp256k1 } from '@noble/curves/secp256k1';
import { bytesToHex } from '@noble/hashes/utils';
import { base58, hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { formatEther, formatGwei, keccak256, parseEther, parseGwei, recoverTransactionAddress, serializeTransaction, toHex, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { signTransfer, type TransferToSign } from '../../src/chains/transfers';
import { Address, Wallet } from '../../src/custody/entities';
import { keyLocation } from '../../src/custody/service';
import { WalletOutput } from '../../src/transactions/entities';
import { Money } from '../../src/shared/money';
import { ANVIL_ACCOUNT, anvilReceipt, startAnvil, type Anvil } from '../support/anvil';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

/** The sandbox price table's default ether price (PRICE_TABLE_SANDBOX): what fee_usd is priced at. */
const SANDBOX_ETH_USD = '3000';

const randomBytes32 = () => btc.utils.randomPrivateKeyBytes();

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
      const solana = await call(rpc('getSlot', [], 4), live.secret, 'solana');
      assert.deepEqual(solana.body, { jsonrpc: '2.0', id: 4, error: { code: -32603, message: 'no node is configured for solana mainnet' } });
      // Tron has no node adapter: live Tron is refused whatever is configured.
      const tron = await call(rpc('eth_blockNumber', [], 5), live.secret, 'tron');
      assert.deepEqual(tron.body, { jsonrpc: '2.0', id: 5, error: { code: -32603, message: 'no Tron node can be configured yet: live Tron is not served (sandbox keys use the devnet)' } });
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
      const tron = await app.request('GET', '/v1/chains/tron/fees', { key: live.secret });
      assert.equal(tron.status, 503);
      assert.equal(tron.body.error.code, 'chain_node_unavailable');
      assert.equal(tron.body.error.details.reason, 'not_configured');
      assert.match(tron.body.error.message, /no Tron node can be configured yet/);
    });
  });

  // After the fee market's test: these transfers' tips would move its percentiles.
  describe('POST /v1/rpc/:chain: broadcasts from custody addresses', () => {
    const outside = privateKeyToAccount(generatePrivateKey()).address;
    let other: TestOrganization;
    before(async () => {
      other = await createTestOrganization('Chains, another organization');
    });

    /** A new wallet of `organization` on `chain`, with its primary address's private key (hex), as the service derives it. */
    async function custodyWallet(organization: TestOrganization, chain: string) {
      const vault = await app.request('POST', '/v1/vaults', { key: organization.secret, body: { name: 'rpc vault' } });
      const wallet = await app.request('POST', '/v1/wallets', { key: organization.secret, body: { name: `${chain} wallet`, chain, vault_id: vault.body.id } });
      assert.equal(wallet.status, 201, wallet.text);
      const em = (await testOrm()).em.fork();
      const row = await em.findOneOrFail(Wallet, { id: wallet.body.id });
      const primary = await em.findOneOrFail(Address, { wallet: row, isPrimary: true });
      const privateKey = await app.deps.keys.withKeys(em, organization.organizationId, row.environment, [keyLocation(row, primary.format, primary.addressIndex)], ([key]) => `0x${bytesToHex(key!.privateKey)}` as Hex);
      return { id: row.id, address: primary.address, privateKey, primary };
    }

    const ethereumTransfer = (privateKey: Hex, nonce = 0) =>
      privateKeyToAccount(privateKey).signTransaction({
        type: 'eip1559',
        chainId: 31337,
        nonce,
        to: outside,
        value: parseEther('0.5'),
        gas: 21_000n,
        maxFeePerGas: parseGwei('100'),
        maxPriorityFeePerGas: parseGwei('1'),
      });
    const chainState = async (address: string) => ({
      nonce: await anvil.call('eth_getTransactionCount', [address, 'latest']),
      balance: await anvil.call('eth_getBalance', [address, 'latest']),
    });
    const assertCustodyRefusal = (answer: { id: unknown; error?: { code: number; message: string; data?: { address?: string } }; result?: unknown }, id: unknown, address: string) => {
      assert.equal(answer.id, id);
      assert.equal(answer.result, undefined, 'nothing was broadcast');
      assert.equal(answer.error?.code, -32003);
      assert.match(answer.error!.message, /POST \/v1\/transactions/);
      assert.equal(answer.error!.data?.address, address);
    };

    it("refuses eth_sendRawTransaction signed by the organization's custody key with -32003 naming POST /v1/transactions; the chain is unchanged", async () => {
      const custody = await custodyWallet(sandbox, 'ethereum');
      await anvil.call('anvil_setBalance', [custody.address, toHex(parseEther('1'))]);
      const before = await chainState(custody.address);
      const signed = await ethereumTransfer(custody.privateKey);

      const refused = await call(rpc('eth_sendRawTransaction', [signed], 'spend'));
      assert.equal(refused.status, 200);
      assertCustodyRefusal(refused.body, 'spend', custody.address);
      // A notification broadcasts nothing either, and a legacy (type 0) transaction is read as well.
      const legacy = await privateKeyToAccount(custody.privateKey).signTransaction({ type: 'legacy', chainId: 31337, nonce: 0, to: outside, value: 1n, gas: 21_000n, gasPrice: parseGwei('100') });
      assert.equal((await call({ jsonrpc: '2.0', method: 'eth_sendRawTransaction', params: [signed] })).status, 204);
      assertCustodyRefusal((await call(rpc('eth_sendRawTransaction', [legacy], 2))).body, 2, custody.address);

      assert.deepEqual(await chainState(custody.address), before, 'nonce and balance unchanged');
      assert.equal(await anvil.call('eth_getTransactionByHash', [keccak256(signed)]), null);
    });

    it('refuses the spend the issue reproduced: a transfer signed by POST /v1/wallets/:id/sign, then broadcast here', async () => {
      const custody = await custodyWallet(sandbox, 'ethereum');
      await anvil.call('anvil_setBalance', [custody.address, toHex(parseEther('1'))]);
      const before = await chainState(custody.address);
      const unsigned = { type: 'eip1559', chainId: 31337, nonce: 0, to: outside, value: parseEther('0.5'), gas: 21_000n, maxFeePerGas: parseGwei('100'), maxPriorityFeePerGas: parseGwei('1') } as const;
      const signature = await app.request('POST', `/v1/wallets/${custody.id}/sign`, { key: sandbox.secret, body: { payload: serializeTransaction(unsigned).slice(2), hash_function: 'keccak256' } });
      assert.equal(signature.status, 200, signature.text);
      const signed = serializeTransaction(unsigned, { r: `0x${signature.body.r}`, s: `0x${signature.body.s}`, yParity: signature.body.recovery_id });
      assert.equal(await recoverTransactionAddress({ serializedTransaction: signed }), custody.address, 'a valid spend, which anvil would mine');

      assertCustodyRefusal((await call(rpc('eth_sendRawTransaction', [signed], 1))).body, 1, custody.address);
      assert.deepEqual(await chainState(custody.address), before, 'nonce and balance unchanged');
    });

    it("refuses a broadcast from another organization's custody address, naming no organization", async () => {
      const theirs = await custodyWallet(other, 'ethereum');
      await anvil.call('anvil_setBalance', [theirs.address, toHex(parseEther('1'))]);
      const before = await chainState(theirs.address);
      const refused = await call(rpc('eth_sendRawTransaction', [await ethereumTransfer(theirs.privateKey)], 1));
      assertCustodyRefusal(refused.body, 1, theirs.address);
      assert.doesNotMatch(JSON.stringify(refused.body), new RegExp(`${other.organizationId}|another organization`, 'i'));
      assert.deepEqual(await chainState(theirs.address), before);
    });

    it("relays a foreign sender's transaction, which anvil mines", async () => {
      const foreignKey = generatePrivateKey();
      const foreign = privateKeyToAccount(foreignKey).address;
      await anvil.call('anvil_setBalance', [foreign, toHex(parseEther('1'))]);
      const transfer = await ethereumTransfer(foreignKey);
      const relayed = await call(rpc('eth_sendRawTransaction', [transfer], 'f'));
      assert.deepEqual(relayed.body, { jsonrpc: '2.0', id: 'f', result: keccak256(transfer) });
      // anvil answers eth_sendRawTransaction once the transaction is in its pool and mines it just after: awaited by its receipt.
      assert.equal((await anvilReceipt(anvil, keccak256(transfer))).status, '0x1');
      assert.equal(await anvil.call('eth_getTransactionCount', [foreign, 'latest']), '0x1');
    });

    it('answers each call of a batch mixing both: the custody broadcast refused, the foreign one relayed, a read answered', async () => {
      const custody = await custodyWallet(sandbox, 'ethereum');
      await anvil.call('anvil_setBalance', [custody.address, toHex(parseEther('1'))]);
      const before = await chainState(custody.address);
      const foreignKey = generatePrivateKey();
      await anvil.call('anvil_setBalance', [privateKeyToAccount(foreignKey).address, toHex(parseEther('1'))]);
      const foreignTransfer = await ethereumTransfer(foreignKey);

      const batch = await call([rpc('eth_sendRawTransaction', [await ethereumTransfer(custody.privateKey)], 'c'), rpc('eth_sendRawTransaction', [foreignTransfer], 'f'), rpc('eth_chainId', [], 'q')]);
      assert.equal(batch.body.length, 3);
      assertCustodyRefusal(batch.body[0], 'c', custody.address);
      assert.deepEqual(batch.body[1], { jsonrpc: '2.0', id: 'f', result: keccak256(foreignTransfer) });
      assert.deepEqual(batch.body[2], { jsonrpc: '2.0', id: 'q', result: '0x7a69' });
      assert.deepEqual(await chainState(custody.address), before);
    });

    it('refuses bytes that are no signed transaction with -32602 instead of relaying them', async () => {
      for (const params of [['0xdeadbeef'], ['not hex'], [], [7]]) {
        const answer = await call(rpc('eth_sendRawTransaction', params, 'x'));
        assert.equal(answer.body.error.code, -32602, JSON.stringify(params));
        assert.match(answer.body.error.message, /nothing was broadcast/);
      }
      const bitcoin = await call(rpc('sendrawtransaction', ['00ff'], 'b'), sandbox.secret, 'bitcoin');
      assert.equal(bitcoin.body.error.code, -32602);
    });

    describe('on the devnet (Bitcoin, Tron, Solana)', () => {
      const TEST_NETWORK = btc.TEST_NETWORK;
      /** A transaction spending `outpoint` to an outside address, signed by `privateKey` for its p2wpkh output. */
      function bitcoinSpend(privateKey: Hex, outpoint: { txid: string; vout: number }, amount: bigint) {
        const key = hex.decode(privateKey.slice(2));
        const tx = new btc.Transaction();
        tx.addInput({ txid: outpoint.txid, index: outpoint.vout, witnessUtxo: { script: btc.p2wpkh(secp256k1.getPublicKey(key), TEST_NETWORK).script, amount } });
        tx.addOutputAddress(btc.p2wpkh(secp256k1.getPublicKey(btc.utils.randomPrivateKeyBytes()), TEST_NETWORK).address!, amount - 1_000n, TEST_NETWORK);
        tx.sign(key);
        tx.finalize();
        return tx.hex;
      }

      it("refuses a Bitcoin spend by the public key its input reveals, and by the recorded output it spends (taproot shows no key); relays a foreign one", async () => {
        const custody = await custodyWallet(sandbox, 'bitcoin');
        const bitcoin = (method: string, params: unknown, id: unknown) => call({ jsonrpc: '2.0', id, method, params }, sandbox.secret, 'bitcoin');
        const byKey = await bitcoin('sendrawtransaction', [bitcoinSpend(custody.privateKey, { txid: hex.encode(randomBytes32()), vout: 0 }, 100_000n)], 1);
        assertCustodyRefusal(byKey.body, 1, custody.address);
        // Bitcoin Core's named form is read too.
        const named = await bitcoin('sendrawtransaction', { hexstring: bitcoinSpend(custody.privateKey, { txid: hex.encode(randomBytes32()), vout: 1 }, 100_000n) }, 2);
        assertCustodyRefusal(named.body, 2, custody.address);

        // An output the platform recorded for the wallet, spent by an input whose witness is a taproot key-path signature alone.
        const em = (await testOrm()).em.fork();
        const recorded = { txid: hex.encode(randomBytes32()), vout: 3 };
        em.create(WalletOutput, {
          organization: sandbox.organizationId,
          environment: 'sandbox',
          wallet: custody.id,
          address: custody.primary.id,
          ...recorded,
          amount: '100000',
          origin: 'deposit',
          createdAt: new Date(),
          updatedAt: new Date(),
        });
        await em.flush();
        const keyless = hex.encode(
          btc.RawTx.encode({
            version: 2,
            segwitFlag: true,
            inputs: [{ txid: hex.decode(recorded.txid), index: recorded.vout, finalScriptSig: new Uint8Array(), sequence: 0xfffffffd }],
            outputs: [{ amount: 90_000n, script: btc.OutScript.encode(btc.Address(TEST_NETWORK).decode(btc.p2wpkh(secp256k1.getPublicKey(btc.utils.randomPrivateKeyBytes()), TEST_NETWORK).address!)) }],
            witnesses: [[new Uint8Array(64).fill(1)]],
            lockTime: 0,
          }),
        );
        assertCustodyRefusal((await bitcoin('sendrawtransaction', [keyless], 3)).body, 3, custody.address);

        // A foreign key's spend reaches the devnet, which answers for itself (it does not know the output).
        const foreign = await bitcoin('sendrawtransaction', [bitcoinSpend(`0x${bytesToHex(btc.utils.randomPrivateKeyBytes())}`, { txid: hex.encode(randomBytes32()), vout: 0 }, 100_000n)], 4);
        assert.notEqual(foreign.body.error?.code, -32003);
        assert.notEqual(foreign.body.error?.code, -32602);
        assert.doesNotMatch(JSON.stringify(foreign.body), /POST \/v1\/transactions/);
      });

      const recentBlock = { height: 1000, hash: base58.encode(new Uint8Array(32).fill(7)), time: new Date() };
      const accountTransfer = (chain: 'tron' | 'solana', from: { address: string; privateKey: Hex }, to: string, assetId: string): string => {
        const key = hex.decode(from.privateKey.slice(2));
        const publicKey = chain === 'solana' ? ed25519.getPublicKey(key) : secp256k1.getPublicKey(key);
        const transfer: TransferToSign = {
          chain,
          testnet: true,
          from: from.address,
          to,
          assetId,
          amount: 1_000n,
          fee: { model: 'flat', fee: chain === 'solana' ? 5_000n : 0n },
          recentBlock: chain === 'solana' ? recentBlock : { ...recentBlock, hash: 'ab'.repeat(32) },
          reference: 'rpc-test',
        };
        return signTransfer(transfer, [{ address: from.address, publicKey, privateKey: key }]).raw;
      };

      it('refuses a Tron broadcasthex signed by a custody key, with or without 0x', async () => {
        const custody = await custodyWallet(sandbox, 'tron');
        const outsider = await custodyWallet(other, 'tron');
        const raw = accountTransfer('tron', custody, outsider.address, 'TRX');
        assertCustodyRefusal((await call(rpc('broadcasthex', [raw], 1), sandbox.secret, 'tron')).body, 1, custody.address);
        assertCustodyRefusal((await call(rpc('broadcasthex', [`0x${raw}`], 2), sandbox.secret, 'tron')).body, 2, custody.address);
      });

      it('refuses a Solana sendTransaction signed by a custody key, base58 (the default) or base64', async () => {
        const custody = await custodyWallet(sandbox, 'solana');
        const raw = accountTransfer('solana', custody, base58.encode(new Uint8Array(32).fill(9)), 'SOL');
        assertCustodyRefusal((await call(rpc('sendTransaction', [raw, { encoding: 'base64' }], 1), sandbox.secret, 'solana')).body, 1, custody.address);
        const base58Form = base58.encode(Uint8Array.from(Buffer.from(raw, 'base64')));
        assertCustodyRefusal((await call(rpc('sendTransaction', [base58Form], 2), sandbox.secret, 'solana')).body, 2, custody.address);
      });
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
