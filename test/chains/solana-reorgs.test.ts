import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import { mnemonicToSeedSync } from '@scure/bip39';
import { SolanaRpcProvider } from '../../src/chains/providers/solana-rpc';
import { signTransfer } from '../../src/chains/transfers';
import { LAMPORTS_PER_SIGNATURE, solanaRecentBlockhash } from '../../src/chains/transfers/solana';
import { coinTypeFor, deriveKey, type DerivedKey } from '../../src/keys/derivation';
import { IncomingTransfer, OutgoingTransfer } from '../../src/monitoring/entities';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { suspenseBalance, suspenseMoves } from '../support/ledger';
import { svmAddress } from '../support/litesvm';
import { createHotWallet, signingOutside, walletBalances } from '../support/reconciliation';
import { startScannedService, type ScannedService } from '../support/scanned-service';
import { DEVNET_GENESIS, SolanaNode } from '../support/solana-node';
import { WebhookReceiver } from '../support/webhook-receiver';

const SOL = 1_000_000_000n;
const CONFIRMATIONS = 2;
const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const funder = deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: randomInt(1, 2 ** 30), index: 0 });
const stranger = () => deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: 0, index: randomInt(2 ** 30) }).address;

/**
 * What a Solana reorganisation deeper than the confirmation count leaves in suspense, and how it
 * leaves: the transactions of the abandoned fork name a recent blockhash; once it is no longer valid
 * at the finalized state (and the node has not mined them), held for the confirmation count, no block
 * can take them. Through the real scanner, Temporal, PostgreSQL and webhooks, against LiteSVM behind a
 * local Solana JSON-RPC (test/support/solana-node.ts), whose `abandonFrom` confirms another fork.
 */
describe('Reorganisations on Solana (LiteSVM): transfers of an abandoned fork, proven never mined once their blockhash expired', () => {
  const node = new SolanaNode();
  let service: ScannedService;
  let provider: SolanaRpcProvider;
  const receiver = new WebhookReceiver();
  const config: Record<string, string> = {};

  before(async () => {
    node.genesis = DEVNET_GENESIS;
    await node.start();
    node.svm.airdrop(svmAddress(funder.address), (1_000n * SOL) as never);
    node.produceBlocks(400);
    provider = new SolanaRpcProvider(node.url, { timeoutMs: 5_000, maxResponseBytes: 1_000_000 });
    await receiver.start();
    Object.assign(config, {
      TEMPORAL_TASK_QUEUE: `solana-reorgs-${randomUUID()}`,
      CHAIN_NODE_SOLANA_SANDBOX: node.url,
      CHAIN_CONFIRMATIONS_SOLANA: String(CONFIRMATIONS),
      CHAIN_SCAN_INTERVAL_SECONDS: '0.5',
    });
    service = await startScannedService('solana', 'Solana reorganisations', config, async () => node.confirmedSlot);
    const endpoint = await service.call('POST', '/v1/webhooks', { name: 'reorgs', url: receiver.url });
    receiver.secrets = [endpoint.body.signing_secret];
  });

  after(async () => {
    await service?.stop();
    await receiver.close();
    await node.stop();
  });

  /** A SOL transfer signed by `from`, executed by the runtime: its signature. */
  const transfer = async (from: DerivedKey, to: string, amount: bigint) => {
    const signed = signTransfer(
      { chain: 'solana', testnet: false, from: from.address, to, assetId: 'SOL', amount, fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE }, recentBlock: await provider.recentBlock(), reference: `tx_${randomInt(2 ** 40)}` },
      [from],
    );
    return (await provider.broadcast(signed.raw)).txid;
  };
  const solOf = async (walletId: string) => (await walletBalances(service, walletId)).SOL ?? 0n;
  const events = () => receiver.attempts.map((attempt) => JSON.parse(attempt.body) as { type: string; data: Record<string, unknown> });
  const suspense = () => suspenseBalance(service.org.organizationId, 'SOL');
  /** Pays the wallet `amount` lamports, credited, in a slot sealed before anything the test does next (so no fork abandoned below takes it). */
  const fund = async (wallet: { id: string; address: string }, amount: bigint) => {
    await transfer(funder, wallet.address, amount);
    await eventually(async () => ((await solOf(wallet.id)) === amount ? true : undefined), 'the wallet funded');
    const slotFunded = node.slot;
    await eventually(async () => (node.confirmedSlot > slotFunded ? true : undefined), 'a slot sealed after the funding');
  };
  /** Confirms another fork from the slot that executed `signature` on. */
  const abandonFork = (signature: string) => node.abandonFrom(node.executed.get(signature)!.slot);
  it('a deposit confirmed, then taken by a fork: in suspense, written off once its blockhash expired at finality (deposit.reversal_final)', async () => {
    const wallet = await createHotWallet(service, 'Deposit lost', 'solana');
    const signature = await transfer(funder, wallet.address, SOL);
    await eventually(async () => ((await solOf(wallet.id)) === SOL ? true : undefined), 'the deposit credited');
    const [deposit] = (await service.call('GET', `/v1/deposits?wallet_id=${wallet.id}`)).body.data as { id: string; status: string }[];
    await eventually(async () => ((await service.call('GET', `/v1/deposits/${deposit!.id}`)).body.status === 'confirmed' ? true : undefined), 'the deposit confirmed');
    const row = async () => (await testOrm()).em.fork().findOneOrFail(IncomingTransfer, { id: deposit!.id }, { refresh: true });
    assert.equal((await row()).neverMined.recentBlockhash, solanaRecentBlockhash(node.executed.get(signature)!.raw), 'the scanner kept the blockhash the transaction names');

    assert.deepEqual(abandonFork(signature), [signature]);
    await eventually(async () => ((await row()).neverMined.lostAt != null ? true : undefined), 'the reversal proven final', 30_000);
    const lost = await row();
    assert.equal(lost.status, 'dropped');
    assert.ok(lost.neverMined.lossSeenAtHeight != null, 'the proof was first seen, then held');
    assert.deepEqual(await suspenseMoves(`${deposit!.id}#0`), [
      ['suspense_entered', SOL],
      ['suspense_written_off', -SOL],
    ]);
    assert.equal(await solOf(wallet.id), 0n, 'the wallet holds what the chain holds: nothing');
    assert.equal(await suspense(), 0n);
    const final = await eventually(async () => events().find((event) => event.type === 'deposit.reversal_final' && event.data.id === deposit!.id), 'deposit.reversal_final delivered');
    assert.equal(final.data.status, 'dropped');
  });

  it('a spend made outside the platform, taken by a fork: the wallet stays debited while it waits, and what it debited returns once its blockhash expired', async () => {
    const wallet = await createHotWallet(service, 'Spend lost', 'solana');
    await fund(wallet, 2n * SOL);
    const spent = SOL / 2n + LAMPORTS_PER_SIGNATURE;
    const signature = await signingOutside(service, wallet.id, (key) => transfer(key, stranger(), SOL / 2n));
    await eventually(async () => ((await solOf(wallet.id)) === 2n * SOL - spent ? true : undefined), 'the spend debited');
    const [lost] = await (await testOrm()).em.fork().find(OutgoingTransfer, { txid: signature });
    assert.equal(lost!.unexpected, true);
    await eventually(async () => events().find((event) => event.type === 'wallet.unexpected_spend' && event.data.tx_hash === signature), 'wallet.unexpected_spend delivered');

    assert.deepEqual(abandonFork(signature), [signature]);
    const row = async () => (await testOrm()).em.fork().findOneOrFail(OutgoingTransfer, { id: lost!.id }, { refresh: true });
    await eventually(async () => ((await row()).neverMined.lostAt != null ? true : undefined), 'the lost spend returned', 30_000);
    assert.equal(await solOf(wallet.id), 2n * SOL, 'what the spend debited is back, as on the chain');
    assert.equal(await suspense(), 0n);
    const returned = await eventually(async () => events().find((event) => event.type === 'wallet.unexpected_spend_returned' && event.data.tx_hash === signature), 'wallet.unexpected_spend_returned delivered');
    assert.deepEqual(returned.data.returned, [{ asset: 'SOL', asset_id: 'SOL', amount: '0.500005', amount_raw: spent.toString() }]);
  });

  it('a send of the platform settled, then taken by a fork: failed reorged_out once its blockhash expired, what it paid back in the wallet', async () => {
    const wallet = await createHotWallet(service, 'Send lost', 'solana');
    await fund(wallet, 2n * SOL);
    const created = await service.call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: stranger(), amount: '0.25', asset: 'SOL' });
    assert.equal(created.status, 201, created.text);
    const send = async () => (await service.call('GET', `/v1/transactions/${created.body.id}`)).body as { status: string; tx_hash: string; failure_reason?: string };
    await eventually(async () => ((await send()).status === 'confirmed' ? true : undefined), 'the send settled', 30_000);
    const settled = await send();
    const paid = 2n * SOL - (await solOf(wallet.id));
    assert.ok(paid > SOL / 4n, 'the amount and the fee debited');

    assert.deepEqual(abandonFork(settled.tx_hash), [settled.tx_hash]);
    await eventually(async () => ((await send()).status === 'failed' ? true : undefined), 'the send failed reorged_out', 30_000);
    assert.equal((await send()).failure_reason, 'reorged_out');
    assert.equal(await solOf(wallet.id), 2n * SOL, 'what it paid is back, as on the chain');
    assert.equal(await suspense(), 0n);
    await eventually(async () => events().find((event) => event.type === 'transaction.failed' && event.data.id === created.body.id), 'transaction.failed delivered');
  });
});
