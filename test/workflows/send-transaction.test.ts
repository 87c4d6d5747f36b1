import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { base58, base64, hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { Worker } from '@temporalio/worker';
import type { ServiceWorkers } from '../../src/worker-setup';
import type { ChainId } from '../../src/catalogue/service';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { acceptDevnetTransaction } from '../../src/chains/devnet/acceptance';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { DevnetTransaction } from '../../src/chains/devnet/entities';
import { ChainNodes } from '../../src/chains/nodes';
import { NodeUnavailableError, TransactionRejectedError, type ChainProvider } from '../../src/chains/provider';
import type { Environment } from '../../src/api-keys/entities';
import { Address } from '../../src/custody/entities';
import { keyLocation } from '../../src/custody/service';
import { signTransfer } from '../../src/chains/transfers';
import { Event } from '../../src/events/entities';
import { OutgoingTransaction, TransactionReplacement, WalletOutput } from '../../src/transactions/entities';
import { confirmDepositOutput, recordDepositOutput } from '../../src/transactions/wallet-outputs';
import { transactionWorkflowId } from '../../src/transactions/flows/transaction';
import { workflowBundle } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { releaseTimeSkippingTemporal, testConfig, testOrm, timeSkippingTemporal } from '../support/environment';
import { creditCustodyWallet } from '../support/ledger';
import { eventually } from '../support/eventually';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { testLogger } from '../support/secret-scan';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

/** How the node misbehaves: each hook runs before (or instead of) the real devnet's answer. */
interface Faults {
  /** The node takes the transaction, then the answer is lost (a timeout after acceptance). */
  acceptThenTimeOut?: boolean;
  /** The node refuses without taking it. */
  refuse?: string;
  /** The node takes (Bitcoin) bytes and evicts them at once: never mined, unknown to later status queries. */
  evict?: boolean;
  /** The node answers every status query "unknown" (it evicted the transaction, or never had it). */
  forget?: boolean;
  /** The node cannot be reached for broadcasts, and for this many status queries. */
  unreachable?: boolean;
  /** Solana: the node says the transaction's recent blockhash has expired (its validity window passed). */
  validityPassed?: boolean;
  statusOutages?: number;
}

/** The real devnet provider behind a switchboard of faults: a node that times out, refuses or is away. */
class FaultyNodes extends ChainNodes {
  faults: Faults = {};
  broadcasts = 0;

  override async provider(chain: ChainId, environment: Environment): Promise<ChainProvider> {
    const real = await super.provider(chain, environment);
    const faults = () => this.faults;
    const count = () => (this.broadcasts += 1);
    return new Proxy(real, {
      get(target, property, receiver) {
        if (property === 'broadcast') {
          return async (raw: string) => {
            count();
            const now = faults();
            if (now.unreachable) throw new NodeUnavailableError('the node did not answer within the timeout');
            if (now.refuse) throw new TransactionRejectedError(now.refuse, `refused: ${now.refuse}`);
            if (now.evict) return { txid: chain === 'solana' ? base58.encode(base64.decode(raw).subarray(1, 65)) : btc.Transaction.fromRaw(hex.decode(raw), { allowUnknownOutputs: true }).id };
            const answer = await target.broadcast(raw);
            if (now.acceptThenTimeOut) throw new NodeUnavailableError('the node did not answer within the timeout');
            return answer;
          };
        }
        if (property === 'transactionStatus') {
          return async (txid: string) => {
            const now = faults();
            if (now.forget) return { state: 'unknown' };
            if (now.statusOutages) {
              now.statusOutages -= 1;
              throw new NodeUnavailableError('the node did not answer within the timeout');
            }
            return target.transactionStatus(txid);
          };
        }
        // The devnet enforces no validity window: this stands for a Solana node past the send's blockhash.
        if (property === 'validityPassed' && chain === 'solana') return async () => faults().validityPassed === true;
        const value = Reflect.get(target, property, receiver) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
}

describe('sendTransactionWorkflow (time-skipping, the devnet behind a faulty node)', () => {
  let app: TestApp;
  let org: TestOrganization;
  let nodes: FaultyNodes;
  let worker: ServiceWorkers;
  let running: Promise<void>;
  const taskQueue = `send-transaction-${randomUUID()}`;
  const config = { ...NO_SEARCH_ATTRIBUTES, TEMPORAL_TASK_QUEUE: taskQueue, CHAIN_CONFIRMATIONS_ETHEREUM: '2', DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_CHECK_SECONDS: '1' };

  before(async () => {
    const env = await timeSkippingTemporal();
    app = await startTestApp({ config, temporal: env });
    org = await createTestOrganization('Send workflow');
    nodes = new FaultyNodes(testConfig(config), testLogger('test'), await testOrm());
    ({ worker } = await createTestWorker(env, taskQueue, config, undefined, { chains: nodes }));
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await app?.close();
    await releaseTimeSkippingTemporal();
  });

  /** A wallet holding `ether` on the devnet and on its ledger (no scanner runs here). */
  async function fundedWallet(ether: bigint) {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Sends' } });
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'Sends', chain: 'ethereum', vault_id: vault.body.id } });
    const em = (await testOrm()).em.fork();
    await fundFromFaucet(em, 'ethereum', { to: wallet.body.primary_address.address, assetId: 'ETH', amount: ether });
    await mineDevnetBlocks(em, 'ethereum', 1);
    await creditCustodyWallet(em, wallet.body.id, 'ETH', ether);
    return { id: wallet.body.id as string, address: wallet.body.primary_address.address as string };
  }
  const send = async (walletId: string) => {
    const created = await app.request('POST', '/v1/transactions', { key: org.secret, body: { wallet_id: walletId, to_address: '0x000000000000000000000000000000000000dEaD', amount: '0.25', asset: 'ETH' } });
    assert.equal(created.status, 201, created.text);
    return created.body.id as string;
  };
  const row = async (id: string) => (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id });
  const ledger = async (walletId: string) => {
    const [balance] = await (await testOrm()).em.fork().execute<{ balance: string; locked: string }[]>(`select balance::text, locked::text from wallet_balances where wallet_id = ? and asset_id = 'ETH'`, [walletId]);
    return { balance: BigInt(balance!.balance), locked: BigInt(balance!.locked) };
  };
  const onChain = async (txHash: string) => (await testOrm()).em.fork().count(DevnetTransaction, { chain: 'ethereum', txid: txHash });
  const events = async (id: string) =>
    (await (await testOrm()).em.fork().find(Event, { organization: org.organizationId }))
      .filter((event) => (event.data as { id?: string }).id === id)
      .map((event) => event.type)
      .sort();

  it('a node that takes the transaction but times out: re-queried, never released, settled once', async () => {
    const env = await timeSkippingTemporal();
    const wallet = await fundedWallet(10n ** 18n);
    nodes.faults = { acceptThenTimeOut: true, statusOutages: 3 };
    const id = await send(wallet.id);
    await eventually(async () => ((await row(id)).txHash && (await onChain((await row(id)).txHash!)) === 1 ? true : undefined), 'the node took it');
    assert.equal((await row(id)).status, 'signed', 'the outcome is unknown: not failed, not released');
    assert.ok((await ledger(wallet.id)).locked > 0n);
    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    const handle = env.client.workflow.getHandle(transactionWorkflowId(id));
    assert.equal(await handle.result(), 'confirmed');
    const settled = await row(id);
    assert.equal(await onChain(settled.txHash!), 1, 'one transaction on chain');
    const after = await ledger(wallet.id);
    assert.equal(after.balance, 10n ** 18n - BigInt(settled.recipientAmount) - BigInt(settled.fee!), 'debited once');
    assert.equal(after.locked, 0n);
    assert.deepEqual(await events(id), ['transaction.broadcast', 'transaction.confirmed', 'transaction.created']);
    // Its checks came at the pace it was started with: CHAIN_CHECK_SECONDS, 1 s in this file's configuration (5 by default).
    const timers = (await handle.fetchHistory()).events!.flatMap((event) => (event.timerStartedEventAttributes ? [Number(event.timerStartedEventAttributes.startToFireTimeout!.seconds)] : []));
    assert.ok(timers.length > 0 && timers.every((seconds) => seconds === 1), `timers of ${timers.join(', ')} s`);
    await recordHistoryIfAsked(handle, 'send-transaction');
  });

  it('a node away for an hour: the send waits, signed and locked, then goes out with the same bytes', async () => {
    const env = await timeSkippingTemporal();
    const wallet = await fundedWallet(10n ** 18n);
    nodes.faults = { unreachable: true };
    const id = await send(wallet.id);
    await eventually(async () => ((await row(id)).status === 'signed' ? true : undefined), 'signed');
    const signed = await row(id);
    // An hour of checks that cannot reach the node (every 30 s by the end): each one an outcome unknown, none a failure.
    await env.sleep('1 hour');
    const waiting = await row(id);
    assert.equal(waiting.status, 'signed', 'never failed while the outcome is unknown');
    assert.equal(waiting.signedTransaction, signed.signedTransaction, 'the very same bytes');
    assert.equal((await ledger(wallet.id)).locked, BigInt(signed.recipientAmount) + BigInt(signed.feeLimit));
    nodes.faults = {};
    // The next check (every 30 s by now) finds the node back and broadcasts the same bytes.
    await env.sleep('1 minute');
    await eventually(async () => ((await onChain(signed.txHash!)) === 1 ? true : undefined), 'broadcast once the node is back');
    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    assert.equal(await env.client.workflow.getHandle(transactionWorkflowId(id)).result(), 'confirmed');
    assert.equal((await ledger(wallet.id)).locked, 0n);
  });

  it('a refusal the node does not know: failed, the lock released, nothing debited', async () => {
    const env = await timeSkippingTemporal();
    const wallet = await fundedWallet(10n ** 18n);
    nodes.faults = { refuse: 'fee_too_low' };
    const id = await send(wallet.id);
    assert.equal(await env.client.workflow.getHandle(transactionWorkflowId(id)).result(), 'failed');
    const failed = await row(id);
    assert.equal(failed.failureReason, 'fee_too_low');
    assert.equal(failed.broadcastAt ?? null, null, 'refused at its first handing: no node ever held it');
    assert.deepEqual(await ledger(wallet.id), { balance: 10n ** 18n, locked: 0n });
    assert.deepEqual(await events(id), ['transaction.created', 'transaction.failed']);
    nodes.faults = {};
  });

  it('blind release: the node forgets the broadcast send and refuses it again (fee_too_low); it stays locked, and mined later it is debited once', async () => {
    const env = await timeSkippingTemporal();
    const wallet = await fundedWallet(10n ** 18n);
    nodes.faults = {};
    const id = await send(wallet.id);
    await eventually(async () => ((await row(id)).status === 'broadcast' ? true : undefined), 'broadcast');
    const locked = (await ledger(wallet.id)).locked;
    nodes.faults = { forget: true, refuse: 'fee_too_low' };
    const broadcastsBefore = nodes.broadcasts;
    await env.sleep('1 hour');
    assert.equal((await row(id)).status, 'broadcast', 'no proof that it can never be mined: still pending');
    assert.ok(nodes.broadcasts > broadcastsBefore + 10, 'broadcast again, check after check');
    assert.deepEqual(await ledger(wallet.id), { balance: 10n ** 18n, locked }, 'nothing released');
    // The network (which kept the transaction) mines it; the node sees the blocks.
    nodes.faults = { refuse: 'fee_too_low' };
    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    assert.equal(await env.client.workflow.getHandle(transactionWorkflowId(id)).result(), 'confirmed');
    const settled = await row(id);
    assert.equal(await onChain(settled.txHash!), 1);
    assert.deepEqual(await ledger(wallet.id), { balance: 10n ** 18n - BigInt(settled.recipientAmount) - BigInt(settled.fee!), locked: 0n }, 'debited once');
    assert.deepEqual(await events(id), ['transaction.broadcast', 'transaction.confirmed', 'transaction.created']);
    nodes.faults = {};
  });

  it('a node that forgets a broadcast send for a moment: the same bytes broadcast again, then mined and settled once', async () => {
    const env = await timeSkippingTemporal();
    const wallet = await fundedWallet(10n ** 18n);
    nodes.faults = {};
    const id = await send(wallet.id);
    await eventually(async () => ((await row(id)).status === 'broadcast' ? true : undefined), 'broadcast');
    const broadcast = await row(id);
    nodes.faults = { forget: true };
    const broadcastsBefore = nodes.broadcasts;
    await env.sleep('20 seconds');
    assert.ok(nodes.broadcasts > broadcastsBefore, 'missing: broadcast again');
    const missing = await row(id);
    assert.equal(missing.status, 'broadcast', 'still pending');
    assert.equal(missing.signedTransaction, broadcast.signedTransaction, 'the very same bytes');
    nodes.faults = {};
    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    const handle = env.client.workflow.getHandle(transactionWorkflowId(id));
    assert.equal(await handle.result(), 'confirmed');
    const settled = await row(id);
    assert.equal(await onChain(settled.txHash!), 1, 'one transaction on chain');
    assert.deepEqual(await ledger(wallet.id), { balance: 10n ** 18n - BigInt(settled.recipientAmount) - BigInt(settled.fee!), locked: 0n }, 'debited once');
    await recordHistoryIfAsked(handle, 'send-transaction-rebroadcast');
  });

  describe('Solana', () => {
    /** A Solana wallet holding `lamports` on the devnet and on its ledger. */
    async function fundedSolanaWallet(lamports: bigint) {
      const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Solana sends' } });
      const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'Solana sends', chain: 'solana', vault_id: vault.body.id } });
      assert.equal(wallet.status, 201, wallet.text);
      const em = (await testOrm()).em.fork();
      await fundFromFaucet(em, 'solana', { to: wallet.body.primary_address.address, assetId: 'SOL', amount: lamports });
      await mineDevnetBlocks(em, 'solana', 1);
      await creditCustodyWallet(em, wallet.body.id, 'SOL', lamports);
      return { id: wallet.body.id as string, address: wallet.body.primary_address.address as string };
    }
    const solLedger = async (walletId: string) => {
      const [balance] = await (await testOrm()).em.fork().execute<{ balance: string; locked: string }[]>(`select balance::text, locked::text from wallet_balances where wallet_id = ? and asset_id = 'SOL'`, [walletId]);
      return { balance: BigInt(balance!.balance), locked: BigInt(balance!.locked) };
    };

    it('a dropped send is failed only on proof: once its recent blockhash expired (expired), its lock released, nothing debited', async () => {
      const env = await timeSkippingTemporal();
      const wallet = await fundedSolanaWallet(2_000_000_000n);
      const recipient = await fundedSolanaWallet(1_000_000_000n);
      // The node takes the bytes and loses them: the chain never sees this send.
      nodes.faults = { evict: true };
      const created = await app.request('POST', '/v1/transactions', { key: org.secret, body: { wallet_id: wallet.id, to_address: recipient.address, amount: '0.5', asset: 'SOL' } });
      assert.equal(created.status, 201, created.text);
      const id = created.body.id as string;
      await eventually(async () => ((await row(id)).status === 'broadcast' ? true : undefined), 'broadcast');
      const locked = (await solLedger(wallet.id)).locked;
      assert.ok(locked > 0n);

      // Unknown to the chain and refused again, but its blockhash may still be valid: no proof, so it stays pending.
      nodes.faults = { refuse: 'blockhash_not_found' };
      await env.sleep('1 hour');
      assert.equal((await row(id)).status, 'broadcast', 'no proof that it can never be mined: still pending');
      assert.deepEqual(await solLedger(wallet.id), { balance: 2_000_000_000n, locked }, 'nothing released');

      // The node says the blockhash expired: the proof.
      nodes.faults = { refuse: 'blockhash_not_found', validityPassed: true };
      assert.equal(await env.client.workflow.getHandle(transactionWorkflowId(id)).result(), 'failed');
      const failed = await row(id);
      assert.equal(failed.failureReason, 'expired');
      assert.deepEqual(await solLedger(wallet.id), { balance: 2_000_000_000n, locked: 0n }, 'released, nothing debited');
      assert.equal(await (await testOrm()).em.fork().count(DevnetTransaction, { chain: 'solana', txid: failed.txHash! }), 0, 'never on chain');
      nodes.faults = {};
    });
  });

  describe('Bitcoin', () => {
    /** A Bitcoin wallet holding one devnet output of `sats`, recorded as its available output and on its ledger. */
    async function fundedBitcoinWallet(sats: bigint) {
      const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Bitcoin sends' } });
      const created = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'Bitcoin sends', chain: 'bitcoin', vault_id: vault.body.id } });
      const em = (await testOrm()).em.fork();
      const address = await em.findOneOrFail(Address, { address: created.body.primary_address.address }, { populate: ['wallet'] });
      const funded = await fundFromFaucet(em, 'bitcoin', { to: address.address, assetId: 'BTC', amount: sats });
      await mineDevnetBlocks(em, 'bitcoin', 1);
      const deposit = { organizationId: org.organizationId, environment: 'sandbox' as const, walletId: address.wallet.id, addressId: address.id, txid: funded.txid, position: funded.position, amount: sats.toString() };
      await recordDepositOutput(em, deposit);
      await confirmDepositOutput(em, deposit);
      await creditCustodyWallet(em, address.wallet.id, 'BTC', sats);
      return { id: address.wallet.id, address, input: { txid: funded.txid, vout: Number(funded.position.slice('out:'.length)), amount: sats } };
    }
    const sendBitcoin = async (walletId: string, to: string) => {
      const created = await app.request('POST', '/v1/transactions', { key: org.secret, body: { wallet_id: walletId, to_address: to, amount: '0.001', asset: 'BTC' } });
      assert.equal(created.status, 201, created.text);
      return created.body.id as string;
    };
    const btcLedger = async (walletId: string) => {
      const [balance] = await (await testOrm()).em.fork().execute<{ balance: string; locked: string }[]>(`select balance::text, locked::text from wallet_balances where wallet_id = ? and asset_id = 'BTC'`, [walletId]);
      return { balance: BigInt(balance!.balance), locked: BigInt(balance!.locked) };
    };
    const outputs = async (walletId: string) =>
      (await (await testOrm()).em.fork().find(WalletOutput, { wallet: walletId })).map((output) => `${output.origin}:${output.status}`).sort();

    it('blind release: inputs stay locked and the change row kept while the node forgets and refuses it; mined later, debited once', async () => {
      const env = await timeSkippingTemporal();
      const wallet = await fundedBitcoinWallet(10_000_000n);
      const recipient = await fundedBitcoinWallet(1_000_000n);
      nodes.faults = {};
      const id = await sendBitcoin(wallet.id, recipient.address.address);
      await eventually(async () => ((await row(id)).status === 'broadcast' ? true : undefined), 'broadcast');
      const locked = await btcLedger(wallet.id);
      nodes.faults = { forget: true, refuse: 'fee_too_low' };
      await env.sleep('1 hour');
      assert.equal((await row(id)).status, 'broadcast', 'still pending');
      assert.deepEqual(await btcLedger(wallet.id), locked, 'nothing released');
      assert.deepEqual(await outputs(wallet.id), ['change:unconfirmed', 'deposit:locked'], 'the input reserved, the change kept');
      nodes.faults = { refuse: 'fee_too_low' };
      await mineDevnetBlocks((await testOrm()).em.fork(), 'bitcoin', 3);
      assert.equal(await env.client.workflow.getHandle(transactionWorkflowId(id)).result(), 'confirmed');
      const settled = await row(id);
      assert.deepEqual(await btcLedger(wallet.id), { balance: 10_000_000n - BigInt(settled.recipientAmount) - BigInt(settled.fee!), locked: 0n }, 'debited once');
      assert.deepEqual(await outputs(wallet.id), ['change:available', 'deposit:spent']);
      nodes.faults = {};
    });

    /** The wallet's key spends its funding input elsewhere (a key used outside the platform), and `blocks` blocks confirm it. */
    async function conflictMined(wallet: Awaited<ReturnType<typeof fundedBitcoinWallet>>, blocks: number) {
      const em = (await testOrm()).em.fork();
      const conflict = await app.deps.keys.withKeys(em, org.organizationId, wallet.address.wallet.environment, [keyLocation(wallet.address.wallet, wallet.address.format, wallet.address.addressIndex)], ([key]) =>
        signTransfer(
          {
            chain: 'bitcoin',
            testnet: true,
            from: wallet.address.address,
            to: wallet.address.address,
            assetId: 'BTC',
            amount: wallet.input.amount - 100_000n,
            fee: { model: 'per_byte', satPerVbyte: 100n },
            reference: randomUUID(),
            bitcoin: { inputs: [{ ...wallet.input, address: wallet.address.address, key: 0 }] },
          },
          [key!],
        ),
      );
      await acceptDevnetTransaction(em, 'bitcoin', conflict.raw);
      await mineDevnetBlocks(em, 'bitcoin', blocks);
    }

    it('an input spent by a confirmed conflicting transaction fails the send: its lock released, the input spent, the change gone', async () => {
      const env = await timeSkippingTemporal();
      const wallet = await fundedBitcoinWallet(10_000_000n);
      const recipient = await fundedBitcoinWallet(1_000_000n);
      // The first broadcast goes unanswered: from then on the bytes may be in a node.
      nodes.faults = { unreachable: true };
      const id = await sendBitcoin(wallet.id, recipient.address.address);
      await eventually(async () => ((await row(id)).broadcastAt ? true : undefined), 'handed to a node');
      await conflictMined(wallet, 1);
      nodes.faults = {};
      assert.equal(await env.client.workflow.getHandle(transactionWorkflowId(id)).result(), 'failed');
      const failed = await row(id);
      assert.equal(failed.failureReason, 'inputs_spent');
      assert.deepEqual(await btcLedger(wallet.id), { balance: 10_000_000n, locked: 0n }, 'the lock released, nothing debited by the send');
      assert.deepEqual(await outputs(wallet.id), ['deposit:spent'], 'the input spent by the conflict, the change never existed');
    });

    it('a dropped send whose inputs a mined conflict spent is failed on that proof, never bumped, even with an automatic bump due', async () => {
      const env = await timeSkippingTemporal();
      const wallet = await fundedBitcoinWallet(10_000_000n);
      const recipient = await fundedBitcoinWallet(1_000_000n);
      // The node takes the send and evicts it: broadcast, then unknown to every check.
      nodes.faults = { evict: true };
      const id = await sendBitcoin(wallet.id, recipient.address.address);
      await eventually(async () => ((await row(id)).status === 'broadcast' ? true : undefined), 'broadcast');
      await env.sleep('10 seconds');
      assert.ok((await row(id)).waitingSinceHeight != null, 'the wait counted from a height');
      // More blocks than FEE_BUMP_AFTER_BLOCKS (12) while it is missing: a bump is due when the conflict is found.
      await conflictMined(wallet, 13);
      nodes.faults = {};
      assert.equal(await env.client.workflow.getHandle(transactionWorkflowId(id)).result(), 'failed');
      assert.equal((await row(id)).failureReason, 'inputs_spent');
      assert.equal(await (await testOrm()).em.fork().count(TransactionReplacement, { transaction: id }), 0, 'no replacement priced, signed or broadcast');
      assert.deepEqual(await btcLedger(wallet.id), { balance: 10_000_000n, locked: 0n }, 'the lock released, nothing debited by the send');
      assert.deepEqual(await outputs(wallet.id), ['deposit:spent']);
    });
  });

  it('replays the recorded send histories with the current workflow code: a plain send, and one sped up (test/chains/anvil-fee-bumping.test.ts)', async () => {
    const bundle = await workflowBundle();
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('send-transaction'), 'send-transaction');
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('send-transaction-speed-up'), 'send-transaction-speed-up');
  });

  it('replays the recorded history of a send broadcast again after the node forgot it with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('send-transaction-rebroadcast'), 'send-transaction-rebroadcast');
  });
});
