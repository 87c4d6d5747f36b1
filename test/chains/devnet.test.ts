import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { secp256k1 } from '@noble/curves/secp256k1';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { encodeFunctionData, erc20Abi, keccak256, parseTransaction, serializeTransaction, toHex, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { DevnetProvider } from '../../src/chains/devnet/provider';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { levelsForQueue, nextBaseFee } from '../../src/chains/devnet/fee-market';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { BITCOIN_BLOCK_SUBSIDY, DEVNET_ETHEREUM_CHAIN_ID, DEVNET_TOKENS } from '../../src/chains/devnet/params';
import { TransactionRejectedError } from '../../src/chains/provider';
import { testOrm } from '../support/environment';

const em = async () => (await testOrm()).em.fork() as EntityManager;
const provider = async (chain: 'bitcoin' | 'ethereum') => new DevnetProvider(chain, await testOrm());

async function rejected(work: Promise<unknown>, reason: string): Promise<TransactionRejectedError> {
  const error = await work.then(
    () => assert.fail(`expected a ${reason} refusal`),
    (thrown: unknown) => thrown,
  );
  assert.ok(error instanceof TransactionRejectedError, String(error));
  assert.equal(error.reason, reason, error.message);
  return error;
}

/** A fresh key and its p2wpkh address on the sandbox network. */
function bitcoinKey() {
  const privateKey = secp256k1.utils.randomPrivateKey();
  const publicKey = secp256k1.getPublicKey(privateKey, true);
  const payment = btc.p2wpkh(publicKey, btc.TEST_NETWORK);
  return { privateKey, publicKey, address: payment.address!, script: payment.script };
}

/** A p2wpkh spend of one output, signed with btc-signer by `signer`. */
function spend(output: { txid: string; vout: number; amount: bigint; script: Uint8Array }, signer: Uint8Array, to: string, amount: bigint): btc.Transaction {
  const tx = new btc.Transaction();
  tx.addInput({ txid: output.txid, index: output.vout, witnessUtxo: { script: output.script, amount: output.amount } });
  tx.addOutputAddress(to, amount, btc.TEST_NETWORK);
  tx.sign(signer);
  tx.finalize();
  return tx;
}

describe('Devnet ledger', () => {
  describe('Bitcoin', () => {
    /** A fresh key holding `amount` sat in one mined output paid by the faucet. */
    async function fundedKey(amount: bigint) {
      const key = bitcoinKey();
      const { txid, position } = await fundFromFaucet(await em(), 'bitcoin', { to: key.address, assetId: 'BTC', amount });
      await mineDevnetBlocks(await em(), 'bitcoin', 1);
      return { ...key, output: { txid, vout: Number(position.slice('out:'.length)), amount, script: key.script } };
    }

    it('puts a faucet transfer in the mempool, then mines it: balance, block and status show it', async () => {
      const bitcoin = await provider('bitcoin');
      const key = bitcoinKey();
      const before = await bitcoin.tip();
      const { txid, position } = await fundFromFaucet(await em(), 'bitcoin', { to: key.address, assetId: 'BTC', amount: 150_000n });
      assert.match(position, /^out:\d+$/);
      assert.deepEqual(await bitcoin.transactionStatus(txid), { state: 'pending' });
      assert.equal(await bitcoin.balance(key.address, 'BTC'), 0n);

      const tip = await mineDevnetBlocks(await em(), 'bitcoin', 1);
      assert.equal(tip.height, before.height + 1);
      assert.equal(await bitcoin.balance(key.address, 'BTC'), 150_000n);
      const block = (await bitcoin.block(tip.height))!;
      assert.equal(block.parentHash, before.hash);
      assert.equal(block.hash, tip.hash);
      assert.deepEqual(
        block.transfers.filter((transfer) => transfer.to === key.address),
        [{ txid, position, to: key.address, from: null, assetId: 'BTC', amount: 150_000n }],
      );
      // The coinbase pays the faucet first.
      assert.equal(block.transfers[0]!.position, 'out:0');
      // Its fee is paid to the coinbase beside the subsidy (with the fees of any other transaction the block took).
      const { fee, ...status } = (await bitcoin.transactionStatus(txid)) as { fee: bigint };
      assert.deepEqual(status, { state: 'mined', blockHeight: tip.height, blockHash: tip.hash, confirmations: 1, succeeded: true });
      assert.ok(fee > 0n && fee <= block.transfers[0]!.amount - BITCOIN_BLOCK_SUBSIDY, `fee ${fee}, coinbase ${block.transfers[0]!.amount}`);
      await mineDevnetBlocks(await em(), 'bitcoin', 2);
      assert.equal(((await bitcoin.transactionStatus(txid)) as { confirmations: number }).confirmations, 3);
    });

    it('accepts a transaction signed by btc-signer under its real txid, and moves its outputs when mined', async () => {
      const bitcoin = await provider('bitcoin');
      const sender = await fundedKey(100_000n);
      const receiver = bitcoinKey();
      const tx = spend(sender.output, sender.privateKey, receiver.address, 90_000n);
      assert.deepEqual(await bitcoin.broadcast(tx.hex), { txid: tx.id });
      // Sent again: the same txid, nothing doubled.
      assert.deepEqual(await bitcoin.broadcast(tx.hex), { txid: tx.id });
      await mineDevnetBlocks(await em(), 'bitcoin', 1);
      assert.equal(await bitcoin.balance(receiver.address, 'BTC'), 90_000n);
      assert.equal(await bitcoin.balance(sender.address, 'BTC'), 0n);
    });

    it('refuses a forged signature: the spending address with another key’s signature', async () => {
      const bitcoin = await provider('bitcoin');
      const owner = await fundedKey(50_000n);
      const thief = bitcoinKey();
      // Signed by the thief over the owner's outpoint, with the owner's public key in the witness.
      const forged = spend({ ...owner.output, script: thief.script }, thief.privateKey, thief.address, 40_000n);
      const raw = btc.RawTx.decode(forged.toBytes(true, true));
      raw.witnesses![0]![1] = owner.publicKey;
      await rejected(bitcoin.broadcast(hex.encode(btc.RawTx.encode(raw))), 'invalid_signature');
      // With the thief's own public key, the witness does not match the output's script.
      await rejected(bitcoin.broadcast(forged.hex), 'invalid_signature');
      assert.equal(await bitcoin.balance(owner.address, 'BTC'), 50_000n);
    });

    it('refuses a second spend of one output, in the mempool and once mined: first seen wins', async () => {
      const bitcoin = await provider('bitcoin');
      const owner = await fundedKey(80_000n);
      const first = spend(owner.output, owner.privateKey, bitcoinKey().address, 70_000n);
      const second = spend(owner.output, owner.privateKey, bitcoinKey().address, 60_000n);
      await bitcoin.broadcast(first.hex);
      await rejected(bitcoin.broadcast(second.hex), 'double_spend');
      await mineDevnetBlocks(await em(), 'bitcoin', 1);
      await rejected(bitcoin.broadcast(second.hex), 'double_spend');
      assert.deepEqual(await bitcoin.transactionStatus(second.id), { state: 'unknown' });
    });

    it('refuses concurrent spends of one output but one', async () => {
      const bitcoin = await provider('bitcoin');
      const owner = await fundedKey(80_000n);
      const spends = Array.from({ length: 5 }, (_, index) => spend(owner.output, owner.privateKey, bitcoinKey().address, 60_000n + BigInt(index)));
      const outcomes = await Promise.allSettled(spends.map((tx) => bitcoin.broadcast(tx.hex)));
      assert.equal(outcomes.filter((outcome) => outcome.status === 'fulfilled').length, 1);
      for (const outcome of outcomes.filter((candidate) => candidate.status === 'rejected')) assert.equal((outcome.reason as TransactionRejectedError).reason, 'double_spend');
    });

    it('refuses dust outputs, a fee below the low rate, unknown inputs and bytes that are no transaction', async () => {
      const bitcoin = await provider('bitcoin');
      const owner = await fundedKey(10_000n);
      const dust = new btc.Transaction();
      dust.addInput({ txid: owner.output.txid, index: owner.output.vout, witnessUtxo: { script: owner.script, amount: 10_000n } });
      dust.addOutputAddress(bitcoinKey().address, 9_000n, btc.TEST_NETWORK);
      dust.addOutputAddress(bitcoinKey().address, 545n, btc.TEST_NETWORK);
      dust.sign(owner.privateKey);
      dust.finalize();
      await rejected(bitcoin.broadcast(dust.hex), 'dust_output');
      // 1 sat for a ~110 vB transaction.
      await rejected(bitcoin.broadcast(spend(owner.output, owner.privateKey, bitcoinKey().address, 9_999n).hex), 'fee_too_low');
      const unknown = { ...owner.output, txid: hex.encode(randomBytes(32)) };
      await rejected(bitcoin.broadcast(spend(unknown, owner.privateKey, bitcoinKey().address, 5_000n).hex), 'unknown_input');
      await rejected(bitcoin.broadcast('00ff'), 'malformed');
    });

    it('answers its RPC subset as bitcoind: blocks, raw transactions, a refusal as an error object, an unknown method -32601', async () => {
      const bitcoin = await provider('bitcoin');
      const owner = await fundedKey(30_000n);
      const tip = await bitcoin.tip();
      const [count, best, hash, block, raw, verbose, fee, unknown] = await bitcoin.relay([
        { method: 'getblockcount', params: [] },
        { method: 'getbestblockhash' },
        { method: 'getblockhash', params: [tip.height] },
        { method: 'getblock', params: [tip.hash, 1] },
        { method: 'getrawtransaction', params: [owner.output.txid] },
        { method: 'getrawtransaction', params: { txid: owner.output.txid, verbose: true } },
        { method: 'estimatesmartfee', params: [6] },
        { method: 'getwalletinfo', params: [] },
      ]);
      assert.deepEqual(count, { result: tip.height });
      assert.deepEqual(best, { result: tip.hash });
      assert.deepEqual(hash, { result: tip.hash });
      const shown = (block as { result: { tx: string[]; height: number; confirmations: number; previousblockhash: string } }).result;
      assert.equal(shown.height, tip.height);
      assert.equal(shown.confirmations, 1);
      assert.ok(shown.tx.includes(owner.output.txid));
      assert.equal(btc.Transaction.fromRaw(hex.decode((raw as { result: string }).result)).id, owner.output.txid);
      const decoded = (verbose as { result: { txid: string; blockhash: string; vout: { value: number; n: number; scriptPubKey: { address?: string } }[] } }).result;
      assert.equal(decoded.blockhash, tip.hash);
      assert.deepEqual(decoded.vout.find((output) => output.n === owner.output.vout), { value: 0.0003, n: owner.output.vout, scriptPubKey: { hex: hex.encode(owner.script), address: owner.address } });
      assert.deepEqual(fee, { result: { feerate: 0.00001, blocks: 6 } });
      assert.equal((unknown as { error: { code: number } }).error.code, -32601);

      const double = spend(owner.output, owner.privateKey, bitcoinKey().address, 20_000n);
      await bitcoin.broadcast(double.hex);
      const [refused] = await bitcoin.relay([{ method: 'sendrawtransaction', params: [spend(owner.output, owner.privateKey, bitcoinKey().address, 21_000n).hex] }]);
      assert.equal((refused as { error: { code: number; data: { reason: string } } }).error.code, -26);
      assert.equal((refused as { error: { code: number; data: { reason: string } } }).error.data.reason, 'double_spend');
    });
  });

  describe('Ethereum', () => {
    const account = () => privateKeyToAccount(toHex(secp256k1.utils.randomPrivateKey()));

    async function fundedAccount(wei: bigint, usdc = 0n) {
      const holder = account();
      await fundFromFaucet(await em(), 'ethereum', { to: holder.address, assetId: 'ETH', amount: wei });
      if (usdc) await fundFromFaucet(await em(), 'ethereum', { to: holder.address, assetId: 'USDC_ETH', amount: usdc });
      await mineDevnetBlocks(await em(), 'ethereum', 1);
      return holder;
    }

    async function transfer(holder: ReturnType<typeof account>, fields: { to: Hex; value?: bigint; data?: Hex; nonce?: number; gas?: bigint; maxFeePerGas?: bigint }) {
      const ethereum = await provider('ethereum');
      const nonce = fields.nonce ?? Number(BigInt(((await ethereum.relay([{ method: 'eth_getTransactionCount', params: [holder.address, 'pending'] }]))[0] as { result: string }).result));
      return holder.signTransaction({
        type: 'eip1559',
        chainId: DEVNET_ETHEREUM_CHAIN_ID,
        nonce,
        to: fields.to,
        value: fields.value ?? 0n,
        data: fields.data,
        gas: fields.gas ?? (fields.data ? 100_000n : 21_000n),
        maxFeePerGas: fields.maxFeePerGas ?? 50_000_000_000n,
        maxPriorityFeePerGas: fields.maxFeePerGas ?? 1_000_000_000n,
      });
    }

    it('puts faucet ether and USDC in the mempool, then mines them: balances and the block show both', async () => {
      const ethereum = await provider('ethereum');
      const holder = account();
      const ether = await fundFromFaucet(await em(), 'ethereum', { to: holder.address, assetId: 'ETH', amount: 10n ** 18n });
      const usdc = await fundFromFaucet(await em(), 'ethereum', { to: holder.address.toLowerCase(), assetId: 'USDC_ETH', amount: 25_000_000n });
      assert.equal(ether.position, 'native');
      assert.equal(usdc.position, 'log:0');
      assert.deepEqual(await ethereum.transactionStatus(ether.txid), { state: 'pending' });
      assert.equal(await ethereum.balance(holder.address, 'ETH'), 0n);

      const tip = await mineDevnetBlocks(await em(), 'ethereum', 1);
      assert.equal(await ethereum.balance(holder.address, 'ETH'), 10n ** 18n);
      assert.equal(await ethereum.balance(holder.address.toLowerCase(), 'USDC_ETH'), 25_000_000n);
      const block = (await ethereum.block(tip.height))!;
      const mine = block.transfers.filter((entry) => entry.to === holder.address);
      assert.equal(mine.length, 2);
      assert.deepEqual(mine.find((entry) => entry.assetId === 'ETH'), { txid: ether.txid, position: 'native', to: holder.address, from: mine[0]!.from, assetId: 'ETH', amount: 10n ** 18n });
      assert.deepEqual(mine.find((entry) => entry.assetId === 'USDC_ETH'), { txid: usdc.txid, position: 'log:0', to: holder.address, from: mine[0]!.from, assetId: 'USDC_ETH', amount: 25_000_000n });
      assert.equal((await ethereum.block(tip.height + 1)), null);
    });

    it('accepts an EIP-1559 transaction signed by viem under keccak of its bytes; charges gas used x the effective price', async () => {
      const ethereum = await provider('ethereum');
      const sender = await fundedAccount(10n ** 18n);
      const receiver = account();
      const signed = await transfer(sender, { to: receiver.address, value: 10n ** 17n });
      assert.deepEqual(await ethereum.broadcast(signed), { txid: keccak256(signed) });
      const tip = await mineDevnetBlocks(await em(), 'ethereum', 1);
      const [receipt] = await ethereum.relay([{ method: 'eth_getTransactionReceipt', params: [keccak256(signed)] }]);
      const { gasUsed, effectiveGasPrice, status, blockNumber } = (receipt as { result: Record<string, string> }).result;
      assert.equal(status, '0x1');
      assert.equal(BigInt(blockNumber!), BigInt(tip.height));
      assert.equal(BigInt(gasUsed!), 21_000n);
      assert.equal(await ethereum.balance(receiver.address, 'ETH'), 10n ** 17n);
      assert.equal(await ethereum.balance(sender.address, 'ETH'), 10n ** 18n - 10n ** 17n - 21_000n * BigInt(effectiveGasPrice!));
    });

    it('moves USDC by transfer(to, amount) to the devnet contract, seen as a Transfer log', async () => {
      const ethereum = await provider('ethereum');
      const sender = await fundedAccount(10n ** 17n, 5_000_000n);
      const receiver = account();
      const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [receiver.address, 2_000_000n] });
      const signed = await transfer(sender, { to: DEVNET_TOKENS.ethereum.USDC_ETH as Hex, data });
      await ethereum.broadcast(signed);
      // A second transfer of more than what is left after the first one is refused.
      const more = await transfer(sender, { to: DEVNET_TOKENS.ethereum.USDC_ETH as Hex, data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [receiver.address, 3_000_001n] }) });
      await rejected(ethereum.broadcast(more), 'insufficient_funds');
      const tip = await mineDevnetBlocks(await em(), 'ethereum', 1);
      assert.equal(await ethereum.balance(receiver.address, 'USDC_ETH'), 2_000_000n);
      assert.equal(await ethereum.balance(sender.address, 'USDC_ETH'), 3_000_000n);
      const [receipt, balanceOf] = await ethereum.relay([
        { method: 'eth_getTransactionReceipt', params: [keccak256(signed)] },
        { method: 'eth_call', params: [{ to: DEVNET_TOKENS.ethereum.USDC_ETH, data: encodeFunctionData({ abi: erc20Abi, functionName: 'balanceOf', args: [receiver.address] }) }, 'latest'] },
      ]);
      const logs = (receipt as { result: { logs: { address: string; topics: string[]; data: string }[] } }).result.logs;
      assert.equal(logs.length, 1);
      assert.equal(logs[0]!.address, DEVNET_TOKENS.ethereum.USDC_ETH!.toLowerCase());
      assert.equal(BigInt(logs[0]!.data), 2_000_000n);
      assert.equal(BigInt((balanceOf as { result: string }).result), 2_000_000n);
      assert.ok((await ethereum.block(tip.height))!.transfers.some((entry) => entry.txid === keccak256(signed) && entry.position.startsWith('log:') && entry.amount === 2_000_000n));
    });

    it('refuses a wrong nonce, a forged signature, too little gas, a fee below the base fee and too little ether', async () => {
      const ethereum = await provider('ethereum');
      const sender = await fundedAccount(10n ** 16n);
      const to = account().address;
      await rejected(ethereum.broadcast(await transfer(sender, { to, value: 1n, nonce: 1 })), 'nonce_too_high');
      await ethereum.broadcast(await transfer(sender, { to, value: 1n, nonce: 0 }));
      await rejected(ethereum.broadcast(await transfer(sender, { to, value: 2n, nonce: 0 })), 'nonce_too_low');
      await mineDevnetBlocks(await em(), 'ethereum', 1);
      await rejected(ethereum.broadcast(await transfer(sender, { to, value: 2n, nonce: 0 })), 'nonce_too_low');

      // The same transaction with its signature's r replaced by a value that is no point's x: no key recovers.
      const valid = parseTransaction(await transfer(sender, { to, value: 1n })) as ReturnType<typeof parseTransaction> & { r: Hex; s: Hex; yParity: number };
      const { r: _r, s, yParity, v: _v, ...fields } = valid;
      let forged: Hex | undefined;
      for (let candidate = 1n; !forged; candidate++) {
        try {
          secp256k1.ProjectivePoint.fromHex(`02${candidate.toString(16).padStart(64, '0')}`);
        } catch {
          forged = serializeTransaction(fields as never, { r: toHex(candidate, { size: 32 }), s, yParity });
        }
      }
      await rejected(ethereum.broadcast(forged), 'invalid_signature');
      // A high s (EIP-2) is refused even though it recovers the sender.
      const highS = toHex(secp256k1.CURVE.n - BigInt(s), { size: 32 });
      await rejected(ethereum.broadcast(serializeTransaction(fields as never, { r: valid.r, s: highS, yParity: 1 - yParity })), 'invalid_signature');

      await rejected(ethereum.broadcast(await transfer(sender, { to, value: 1n, gas: 20_999n })), 'gas_limit_too_low');
      await rejected(ethereum.broadcast(await transfer(sender, { to, value: 1n, maxFeePerGas: 1n })), 'fee_too_low');
      await rejected(ethereum.broadcast(await transfer(sender, { to, value: 10n ** 16n })), 'insufficient_funds');
      const other = privateKeyToAccount(toHex(secp256k1.utils.randomPrivateKey()));
      await rejected(ethereum.broadcast(await other.signTransaction({ type: 'eip1559', chainId: 1, nonce: 0, to, value: 1n, gas: 21_000n, maxFeePerGas: 10n ** 10n, maxPriorityFeePerGas: 1n })), 'wrong_chain');
    });

    it('answers its JSON-RPC subset through relay(): chain id, balance, nonce, send, fee history, -32601', async () => {
      const ethereum = await provider('ethereum');
      const holder = await fundedAccount(3n * 10n ** 17n);
      const signed = await transfer(holder, { to: account().address, value: 5n });
      const answers = await ethereum.relay([
        { method: 'eth_chainId', params: [] },
        { method: 'eth_getBalance', params: [holder.address, 'latest'] },
        { method: 'eth_sendRawTransaction', params: [signed] },
        { method: 'eth_getTransactionCount', params: [holder.address, 'latest'] },
        { method: 'eth_getTransactionCount', params: [holder.address, 'pending'] },
        { method: 'eth_getTransactionByHash', params: [keccak256(signed)] },
        { method: 'eth_sendRawTransaction', params: [signed.slice(0, -2)] },
        { method: 'eth_mine', params: [] },
        { method: 'eth_getBalance', params: [holder.address, '0x0'] },
      ]);
      assert.deepEqual(answers[0], { result: '0xaa36a7' });
      assert.deepEqual(answers[1], { result: toHex(3n * 10n ** 17n) });
      assert.deepEqual(answers[2], { result: keccak256(signed) });
      assert.deepEqual(answers[3], { result: '0x0' });
      assert.deepEqual(answers[4], { result: '0x1' });
      const pending = (answers[5] as { result: Record<string, unknown> }).result;
      assert.equal(pending.blockNumber, null);
      assert.equal(pending.from, holder.address);
      assert.equal(pending.hash, keccak256(signed));
      assert.equal((answers[6] as { error: { code: number } }).error.code, -32000);
      assert.equal((answers[7] as { error: { code: number } }).error.code, -32601);
      assert.equal((answers[8] as { error: { code: number } }).error.code, -32000);

      const tip = await mineDevnetBlocks(await em(), 'ethereum', 1);
      const [history, block] = await ethereum.relay([
        { method: 'eth_feeHistory', params: ['0x2', 'latest', [50]] },
        { method: 'eth_getBlockByNumber', params: [toHex(tip.height), false] },
      ]);
      const fees = (history as { result: { oldestBlock: string; baseFeePerGas: string[]; gasUsedRatio: number[]; reward: string[][] } }).result;
      assert.equal(BigInt(fees.oldestBlock), BigInt(tip.height - 1));
      assert.equal(fees.baseFeePerGas.length, 3);
      assert.equal(fees.reward.length, 2);
      assert.equal(BigInt(fees.reward[1]![0]!), 1_000_000_000n);
      const shown = (block as { result: { hash: string; transactions: string[] } }).result;
      assert.equal(shown.hash, tip.hash);
      assert.ok(shown.transactions.includes(keccak256(signed)));
    });

    it('identifies itself as Sepolia: the network sandbox Ethereum wallets name', async () => {
      assert.deepEqual(await (await provider('ethereum')).identifyNetwork(), { network: 'devnet', chainId: 11_155_111 });
    });
  });

  describe('Fee market', () => {
    it("moves Ethereum's base fee with block fullness as EIP-1559 says", () => {
      const limit = 30_000_000n;
      assert.equal(nextBaseFee(1_000_000_000n, 15_000_000n, limit), 1_000_000_000n);
      assert.equal(nextBaseFee(1_000_000_000n, 30_000_000n, limit), 1_125_000_000n);
      assert.equal(nextBaseFee(1_000_000_000n, 0n, limit), 875_000_000n);
      assert.equal(nextBaseFee(7n, 15_000_001n, limit), 8n);
    });

    it('raises each level above the bid that would be left out of its target blocks', () => {
      const floors = { low: 1n, medium: 2n, high: 3n };
      assert.deepEqual(levelsForQueue([], 100n, floors), floors);
      // 10 transactions of 50 units at bids 10..19, blocks of 100: the next block takes the top two.
      const queue = Array.from({ length: 10 }, (_, index) => ({ bid: 10n + BigInt(index), weight: 50n }));
      assert.deepEqual(levelsForQueue(queue, 100n, floors), { high: 18n, medium: 14n, low: 1n });
      assert.deepEqual(levelsForQueue(queue, 40n, floors), { high: 20n, medium: 18n, low: 16n });
    });
  });
});
