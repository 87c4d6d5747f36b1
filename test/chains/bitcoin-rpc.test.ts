import assert from 'node:assert/strict';
import * as btc from '@scure/btc-signer';
import { ChainNodes, ChainUnavailableError } from '../../src/chains/nodes';
import { NodeUnavailableError, TransactionRejectedError, type ObservedTransfer } from '../../src/chains/provider';
import { BitcoinRpcProvider, FEE_FLOOR_SAT_PER_VBYTE } from '../../src/chains/providers/bitcoin-rpc';
import { deriveKey, TESTNET_COIN_TYPE, type DerivedKey } from '../../src/keys/derivation';
import { mnemonicToSeed } from '../../src/keys/mnemonic';
import { createLogger } from '../../src/logger';
import { Money } from '../../src/shared/money';
import { COINBASE_MATURITY, coinbaseOutput, MINER_FEE, MINER_PAYMENT, payFromMiner, startBtcdOrSkip, type Btcd } from '../support/btcd';
import { testConfig, testOrm } from '../support/environment';

/** BIP-39's public test mnemonic: the custody key below is derived the way an organization's seed grows its keys. */
const TEST_MNEMONIC = 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about';

describe('bitcoin-rpc provider on a real btcd node (regtest)', function () {
  let btcd: Btcd;
  let provider: BitcoinRpcProvider;
  let ours: DerivedKey;
  /** The miner's script in the sandbox's address form: what block() reports for a coinbase. */
  const minerSandboxAddress = btc.Address(btc.TEST_NETWORK).encode(btc.OutScript.decode(MINER_PAYMENT.script));

  before(async function () {
    btcd = await startBtcdOrSkip(this);
    provider = new BitcoinRpcProvider(btcd.url, { timeoutMs: 10_000, maxResponseBytes: 10_485_760 }, 'sandbox');
    ours = deriveKey(await mnemonicToSeed(Buffer.from(TEST_MNEMONIC)), { chain: 'bitcoin', testnet: true, coinType: TESTNET_COIN_TYPE, format: 'p2wpkh', account: 0, index: 0 });
    // The first coinbase matures once COINBASE_MATURITY blocks are on top of it.
    await btcd.generate(COINBASE_MATURITY + 1);
  });
  after(async () => {
    ours?.privateKey.fill(0);
    await btcd?.stop();
  });

  it('identifies the network as regtest', async () => {
    assert.deepEqual(await provider.identifyNetwork(), { network: 'regtest' });
  });

  it('answers three fee levels, the documented floor while the node has no estimate', async () => {
    assert.deepEqual(await provider.feeMarket(), { model: 'per_byte', satPerVbyte: FEE_FLOOR_SAT_PER_VBYTE });
  });

  it('reads the tip and a block: hash, parent, time and the coinbase output in the sandbox address form', async () => {
    const [minedHash] = await btcd.generate(1);
    const tip = await provider.tip();
    assert.equal(tip.hash, minedHash);
    assert.equal(tip.height, await btcd.call('getblockcount'));

    const block = await provider.block(tip.height);
    assert.ok(block);
    assert.equal(block.hash, tip.hash);
    assert.equal(block.height, tip.height);
    assert.equal(block.parentHash, await btcd.call('getblockhash', [tip.height - 1]));
    const header = (await btcd.call('getblockheader', [tip.hash, true])) as { time: number };
    assert.equal(block.time.getTime(), header.time * 1000);
    const coinbase = await coinbaseOutput(btcd, tip.height);
    assert.deepEqual(block.transfers, [
      { txid: coinbase.txid, position: 'out:0', to: minerSandboxAddress, from: null, assetId: 'BTC', amount: coinbase.amount },
    ]);
    assert.ok(minerSandboxAddress.startsWith('tb1q'), 'regtest bcrt1 outputs are reported in the sandbox tb1 form');

    assert.equal(await provider.block(tip.height + 1), null);
  });

  it('sees a deposit to a p2wpkh address of ours: pending, then mined with the exact satoshis, confirmations growing', async () => {
    const amount = 123_456_789n;
    const payment = payFromMiner(await coinbaseOutput(btcd, 1), ours.address, amount);
    assert.ok(ours.address.startsWith('tb1q'));

    const { txid } = await provider.broadcast(payment.hex);
    assert.equal(txid, payment.id);
    assert.deepEqual(await provider.transactionStatus(txid), { state: 'pending' });
    assert.deepEqual(await provider.broadcast(payment.hex), { txid }, 'a rebroadcast of a transaction the node holds is not a refusal');
    assert.equal(await provider.balance(ours.address, 'BTC'), 0n, 'an unconfirmed receipt is not in the balance');

    const [blockHash] = await btcd.generate(1);
    const tip = await provider.tip();
    const block = await provider.block(tip.height);
    const deposit: ObservedTransfer = { txid, position: 'out:0', to: ours.address, from: null, assetId: 'BTC', amount };
    assert.deepEqual(
      block!.transfers.find((transfer) => transfer.to === ours.address),
      deposit,
    );
    assert.deepEqual(
      block!.transfers.filter((transfer) => transfer.txid === txid).map((transfer) => transfer.position),
      ['out:0', 'out:1'],
      'the change output is a transfer too (to the miner)',
    );
    assert.deepEqual(await provider.transactionStatus(txid), { state: 'mined', blockHeight: tip.height, blockHash, confirmations: 1, succeeded: true, fee: MINER_FEE });

    await btcd.generate(2);
    assert.deepEqual(await provider.transactionStatus(txid), { state: 'mined', blockHeight: tip.height, blockHash, confirmations: 3, succeeded: true, fee: MINER_FEE });
    assert.equal(await provider.balance(ours.address, 'BTC'), amount);
    assert.deepEqual(await provider.broadcast(payment.hex), { txid }, 'a rebroadcast of a mined transaction is not a refusal');
  });

  it("reports the confirmed balance: our own spend counts once it is mined", async () => {
    const received = 50_000_000n;
    const deposit = payFromMiner(await coinbaseOutput(btcd, 2), ours.address, received);
    await provider.broadcast(deposit.hex);
    await btcd.generate(1);
    const before = await provider.balance(ours.address, 'BTC');

    const spend = new btc.Transaction();
    spend.addInput({ txid: deposit.id, index: 0, witnessUtxo: { script: btc.OutScript.encode(btc.Address(btc.TEST_NETWORK).decode(ours.address)), amount: received } });
    spend.addOutput({ script: MINER_PAYMENT.script, amount: received - MINER_FEE });
    spend.sign(ours.privateKey);
    spend.finalize();
    await provider.broadcast(spend.hex);
    assert.equal(await provider.balance(ours.address, 'BTC'), before, 'an unconfirmed spend does not deduct');
    await btcd.generate(1);
    assert.equal(await provider.balance(ours.address, 'BTC'), before - received);
  });

  it('refuses a double spend of a coinbase output, in the mempool and once mined, with reason double_spend; the output is spent in the chain once the first spend is mined', async () => {
    const spent = await coinbaseOutput(btcd, 3);
    const outpoint = { txid: spent.txid, vout: spent.index };
    const first = payFromMiner(spent, ours.address, 1_000_000n);
    await provider.broadcast(first.hex);
    const conflicting = payFromMiner(spent, ours.address, 2_000_000n);
    await assert.rejects(provider.broadcast(conflicting.hex), (error: unknown) => {
      assert.ok(error instanceof TransactionRejectedError);
      assert.equal(error.reason, 'double_spend');
      return true;
    });
    assert.equal(await provider.spentInChain(outpoint), false, 'spent in the mempool only: the conflict may still win');
    assert.equal(await provider.spentInChain({ txid: first.id, vout: 0 }), false, 'an output of an unmined transaction');
    await btcd.generate(1);
    await assert.rejects(provider.broadcast(conflicting.hex), (error: unknown) => error instanceof TransactionRejectedError && error.reason === 'double_spend');
    assert.equal(await provider.spentInChain(outpoint), true, 'a mined transaction spends it');
    assert.equal(await provider.spentInChain({ txid: first.id, vout: 0 }), false, 'mined and unspent');
    assert.deepEqual(await provider.transactionStatus(conflicting.id), { state: 'unknown' }, 'the conflict can never be mined');
  });

  it("follows the node's fee estimate (BTC/kvB, rounded up to sat/vB) once mined transactions gave it one", async () => {
    const market = await provider.feeMarket();
    for (const [level, target] of [['low', 6], ['medium', 3], ['high', 1]] as const) {
      const btcPerKvB = (await btcd.call('estimatefee', [target]).catch(() => undefined)) as number | undefined;
      assert.ok(btcPerKvB !== undefined && btcPerKvB > 0, `btcd has an estimate for ${target} blocks`);
      assert.equal(market.model === 'per_byte' && market.satPerVbyte[level], BigInt(new Money(btcPerKvB).times(100_000).ceil().toFixed(0)));
    }
  });

  it('refuses bytes that are not a transaction as malformed, and knows nothing of an unknown txid', async () => {
    await assert.rejects(provider.broadcast('00'), (error: unknown) => error instanceof TransactionRejectedError && error.reason === 'malformed');
    assert.deepEqual(await provider.transactionStatus('ab'.repeat(32)), { state: 'unknown' });
  });

  it("relays calls and returns the node's own answers, its error objects verbatim", async () => {
    const [count] = await provider.relay([{ method: 'getblockcount', params: [] }]);
    assert.deepEqual(count, { result: await btcd.call('getblockcount') });

    const batch = await provider.relay([{ method: 'getblockcount' }, { method: 'nosuchmethod', params: [] }, { method: 'getblockhash', params: [0] }]);
    assert.deepEqual(batch, [
      { result: await btcd.call('getblockcount') },
      { error: { code: -32601, message: 'Method not found' } },
      { result: await btcd.call('getblockhash', [0]) },
    ]);
  });

  it('never puts the URL or the RPC credentials in an error', async () => {
    const url = new URL(btcd.url);
    const wrongPassword = new URL(btcd.url);
    wrongPassword.password = 'not-the-password';
    const refused = new BitcoinRpcProvider(wrongPassword.toString(), { timeoutMs: 10_000, maxResponseBytes: 10_485_760 }, 'sandbox');
    const unreachable = new BitcoinRpcProvider(`http://${url.username}:${url.password}@127.0.0.1:1/`, { timeoutMs: 2_000, maxResponseBytes: 10_485_760 }, 'sandbox');
    for (const [candidate, expected] of [
      [refused, 'The node refused the RPC credentials (HTTP 401).'],
      [unreachable, 'The node could not be reached.'],
    ] as const) {
      const error = await candidate.tip().then(
        () => assert.fail('expected a NodeUnavailableError'),
        (thrown: unknown) => thrown,
      );
      assert.ok(error instanceof NodeUnavailableError);
      assert.equal(error.message, expected);
      for (const secret of [url.password, url.username, url.host, 'not-the-password']) assert.ok(!String(error.stack).includes(secret));
    }
  });

  it('is served to sandbox keys and refused to live keys, which need mainnet; a configured sandbox network is enforced', async () => {
    const log = createLogger('silent');
    const nodes = new ChainNodes(testConfig({ CHAIN_NODE_BITCOIN_SANDBOX: btcd.url, CHAIN_NODE_BITCOIN_LIVE: btcd.url }), log, await testOrm());
    assert.equal((await nodes.provider('bitcoin', 'sandbox')).kind, 'bitcoin-rpc');
    await assert.rejects(nodes.provider('bitcoin', 'live'), (error: unknown) => error instanceof ChainUnavailableError && error.reason === 'network_mismatch');

    const regtest = new ChainNodes(testConfig({ CHAIN_NODE_BITCOIN_SANDBOX: btcd.url, CHAIN_NODE_BITCOIN_SANDBOX_NETWORK: 'regtest' }), log, await testOrm());
    assert.equal((await regtest.provider('bitcoin', 'sandbox')).kind, 'bitcoin-rpc');
    const testnet = new ChainNodes(testConfig({ CHAIN_NODE_BITCOIN_SANDBOX: btcd.url, CHAIN_NODE_BITCOIN_SANDBOX_NETWORK: 'testnet' }), log, await testOrm());
    await assert.rejects(testnet.provider('bitcoin', 'sandbox'), (error: unknown) => error instanceof ChainUnavailableError && error.reason === 'network_mismatch');
  });
});
