import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { secp256k1 } from '@noble/curves/secp256k1';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { ChainNodes } from '../../src/chains/nodes';
import { OutgoingTransfer } from '../../src/monitoring/entities';
import { chainScanWorkflowId, scanThroughUpdate } from '../../src/monitoring/flows/chain-scan';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { transactionWorkflowId } from '../../src/transactions/flows/transaction';
import { type TestApp, type TestOrganization } from '../support/app';
import { activitiesScheduled } from '../support/histories';
import { COINBASE_MATURITY, coinbaseOutput, payFromMiner, REGTEST_NETWORK, startBtcdOrSkip, type Btcd, btcdHeight, btcdSandboxConfig } from '../support/btcd';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 2;
/** Blocks a send waits unmined before its workflow bumps its fee. */
const BUMP_AFTER = 3;
/**
 * btcd relays a transaction below its minimum relay rate (2 sat/vB here) when relay priority is off, but
 * with no priority area its blocks never take one: a send at 1 sat/vB waits in the mempool however many
 * blocks are mined, as one caught by a fee spike would.
 */
const STUCK_BELOW_2_SAT_PER_VBYTE = ['--minrelaytxfee=0.00002', '--norelaypriority', '--blockprioritysize=0'];

interface Replacement {
  kind: string;
  origin: string;
  status: string;
  tx_hash: string | null;
  fee_limit_raw: string;
}

interface Transaction {
  id: string;
  status: string;
  recipient_amount_raw: string;
  fee_raw: string | null;
  fee_limit_raw: string;
  tx_hash: string | null;
  failure_reason: string | null;
  replacements: Replacement[];
}

/** An address nobody holds a key to in these tests, in the sandbox (testnet) form the API takes. */
const outsideP2wpkh = () => btc.p2wpkh(secp256k1.getPublicKey(randomBytes(32), true), btc.TEST_NETWORK).address!;
const nodeForm = (address: string) => btc.Address(REGTEST_NETWORK).encode(btc.Address(btc.TEST_NETWORK).decode(address));

/**
 * Fee bumping of Bitcoin sends by BIP-125 replace-by-fee on a real node (btcd, regtest): speed-up,
 * cancel and the automatic bump replace a send in the node's mempool by one spending the same inputs
 * at a higher fee; each ends with one mined transaction, one debit, no lock, the mined candidate's
 * change spendable and ledger = chain.
 */
describe('Bitcoin fee bumping on a real node (btcd, regtest): speed-up, cancel and the automatic bump by BIP-125 replacement', function () {
  let btcd: Btcd;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  let config: Record<string, string>;
  let wallet: { id: string; primary: string };
  let nextCoinbase = 1;

  before(async function () {
    btcd = await startBtcdOrSkip(this, STUCK_BELOW_2_SAT_PER_VBYTE);
    await btcd.generate(COINBASE_MATURITY + 10);
    const taskQueue = `btcd-fee-bumping-${randomUUID()}`;
    config = {
      ...btcdSandboxConfig(btcd, taskQueue, CONFIRMATIONS),
      FEE_BUMP_AFTER_BLOCKS: String(BUMP_AFTER),
      // The bump pays the market's high level (5 sat/vB) in full, well above this node's 2 sat/vB.
      FEE_BUMP_MAX_MULTIPLE: '10',
    };
    service = await startScannedService('bitcoin', 'btcd fee bumping', config, () => btcdHeight(btcd));
    ({ app, org } = service);
    const vault = await call('POST', '/v1/vaults', { name: 'BTC' });
    const created = await call('POST', '/v1/wallets', { name: 'BTC', chain: 'bitcoin', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    wallet = { id: created.body.id, primary: created.body.primary_address.address };
  });
  after(async () => {
    if (!btcd) return;
    await service?.stop();
    await btcd.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const read = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as Transaction;
  const balance = async () => {
    const row = (await call('GET', `/v1/wallets/${wallet.id}/balances`)).body.data[0] as { balance: string; locked: string };
    return { balance: BigInt(row.balance), locked: BigInt(row.locked) };
  };
  const mempool = async () => (await btcd.call('getrawmempool')) as string[];
  async function scanned() {
    const height = Number(await btcd.call('getblockcount'));
    const handle = (await localTemporal()).client.workflow.getHandle(chainScanWorkflowId('bitcoin', 'sandbox'));
    const through = await handle.executeUpdate(scanThroughUpdate, { args: [{ height, waitSeconds: 30 }] });
    assert.ok(through.reached, 'scanning reached the tip');
  }
  /** Pays `amount` from a coinbase output to the wallet's primary address and waits for it to be credited. */
  async function funded(amount: bigint): Promise<void> {
    const before = (await balance()).balance;
    const payment = payFromMiner(await coinbaseOutput(btcd, nextCoinbase++), wallet.primary, amount);
    await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await balance()).balance === before + amount ? true : undefined), 'the deposit credited');
  }
  /** A send at 1 sat/vB, broadcast and waiting in btcd's mempool (no block takes it). */
  async function waitingSend(amount: string): Promise<Transaction> {
    const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outsideP2wpkh(), amount, asset: 'BTC', fee_rate: '1' });
    assert.equal(created.status, 201, created.text);
    return eventually(async () => {
      const transaction = await read(created.body.id);
      return transaction.status === 'broadcast' && (await mempool()).includes(transaction.tx_hash!) ? transaction : undefined;
    }, 'the send in the mempool');
  }
  /** Waits for the send's replacement to take its place in the mempool, then mines until the send is settled. */
  async function settledOnReplacement(id: string): Promise<Transaction> {
    await eventually(async () => {
      const [replacement] = (await read(id)).replacements;
      return replacement?.status === 'broadcast' && (await mempool()).includes(replacement.tx_hash!) ? true : undefined;
    }, 'the replacement in the mempool');
    return settled(id);
  }
  async function settled(id: string): Promise<Transaction> {
    return eventually(
      async () => {
        const transaction = await read(id);
        if (['confirmed', 'failed'].includes(transaction.status)) return transaction;
        await btcd.generate(1);
        return undefined;
      },
      'the send settled',
      60_000,
      1_000,
    );
  }
  /** The transaction as mined: its outputs (node address form) and the fee its inputs leave. */
  async function onNode(txid: string) {
    const raw = btc.Transaction.fromRaw(hex.decode((await btcd.call('getrawtransaction', [txid, 0])) as string), { allowUnknownOutputs: true });
    let inputTotal = 0n;
    const inputs: string[] = [];
    for (let index = 0; index < raw.inputsLength; index++) {
      const input = raw.getInput(index);
      const previous = btc.Transaction.fromRaw(hex.decode((await btcd.call('getrawtransaction', [hex.encode(input.txid!), 0])) as string), { allowUnknownOutputs: true });
      inputTotal += previous.getOutput(input.index!).amount!;
      inputs.push(`${hex.encode(input.txid!)}:${input.index}`);
    }
    const outputs = Array.from({ length: raw.outputsLength }, (_, index) => ({ address: btc.Address(REGTEST_NETWORK).encode(btc.OutScript.decode(raw.getOutput(index).script!)), amount: raw.getOutput(index).amount! }));
    const verbose = (await btcd.call('getrawtransaction', [txid, 1])) as { confirmations?: number };
    return { inputs, outputs, fee: inputTotal - outputs.reduce((sum, output) => sum + output.amount, 0n), confirmations: verbose.confirmations ?? 0 };
  }
  /** The send's wallet outputs: what it spent and the change rows it created, by txid. */
  async function outputsOf(transactionId: string) {
    const rows = await (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ txid: string; vout: number; status: string; spent_by_id: string | null; created_by_id: string | null; amount: string }[]>(
        `select txid, vout, status, spent_by_id, created_by_id, amount::text as amount from wallet_outputs where spent_by_id = ? or created_by_id = ? order by txid, vout`,
        [transactionId, transactionId],
      );
    return { spent: rows.filter((row) => row.spent_by_id === transactionId), created: rows.filter((row) => row.created_by_id === transactionId) };
  }
  /** The send's debit entries in the custody journal: amount and fee, once. */
  async function debits(transactionId: string) {
    return (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ kind: string; balance: string }[]>(`select kind, balance::text as balance from custody_journal_entries where reference_type = 'transaction' and reference_id like ? and kind in ('send_debit', 'fee_debit') order by kind`, [
        `${transactionId}%`,
      ]);
  }
  async function ledgerMatchesChain() {
    await scanned();
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), await nodes.provider('bitcoin', 'sandbox'), { chain: 'bitcoin', environment: 'sandbox', organizationId: org.organizationId });
    assert.deepEqual(result.mismatches, []);
    const outgoing = await (await testOrm()).em.fork().find(OutgoingTransfer, { organization: org.organizationId });
    assert.deepEqual(outgoing.filter((transfer) => transfer.unexpected || transfer.transactionId == null), [], "every spend the platform's, a replacement its send's");
    return outgoing;
  }

  it("speeds up a send in the mempool: the replacement (same inputs and recipient, the extra fee from the change) is mined, debited once, its change spendable, the replaced change never", async () => {
    await funded(10_000_000n);
    const before = await balance();
    const original = await waitingSend('0.01');
    const originalOutputs = await outputsOf(original.id);
    const asked = await call('POST', `/v1/transactions/${original.id}/speed-up`, { fee_rate: '5' });
    assert.equal(asked.status, 200, asked.text);
    const [requested] = (asked.body as Transaction).replacements;
    assert.deepEqual([requested!.kind, requested!.status], ['speed_up', 'requested']);
    const replacementFee = BigInt(requested!.fee_limit_raw);
    assert.ok(replacementFee >= 2n * BigInt(original.fee_limit_raw), 'BIP-125: the replaced fee plus 1 sat/vB of the size, at least');
    assert.equal((await balance()).locked, 1_000_000n + replacementFee, 'the extra fee is locked before it is signed');

    const done = await settledOnReplacement(original.id);
    assert.equal(done.status, 'confirmed');
    const [replacement] = done.replacements;
    assert.equal(replacement!.status, 'mined');
    assert.equal(done.tx_hash, replacement!.tx_hash, 'the send shows the mined txid');
    assert.notEqual(done.tx_hash, original.tx_hash);
    await assert.rejects(btcd.call('getrawtransaction', [original.tx_hash, 1]), 'the original was never mined');
    const mined = await onNode(done.tx_hash!);
    assert.deepEqual(mined.inputs.sort(), originalOutputs.spent.map((row) => `${row.txid}:${row.vout}`).sort(), 'the same inputs');
    assert.equal(mined.outputs[0]!.amount, 1_000_000n, 'the recipient is paid the amount');
    assert.equal(mined.outputs[1]!.address, nodeForm(wallet.primary), 'the change back to the wallet');
    assert.equal(mined.fee, replacementFee);
    assert.equal(done.fee_raw, replacementFee.toString());

    const outputs = await outputsOf(original.id);
    assert.deepEqual(outputs.spent.map((row) => row.status), outputs.spent.map(() => 'spent'));
    assert.deepEqual(
      outputs.created.filter((row) => row.status !== 'unconfirmed').map((row) => [row.txid, row.vout, row.status, BigInt(row.amount)]),
      [[done.tx_hash, 1, 'available', mined.outputs[1]!.amount]],
      "the mined candidate's change the only spendable one",
    );
    assert.deepEqual(outputs.created.filter((row) => row.status === 'unconfirmed').map((row) => row.txid), [original.tx_hash], "the original's kept unconfirmed: never spendable, never a deposit");
    assert.deepEqual(await debits(original.id), [
      { kind: 'fee_debit', balance: (-replacementFee).toString() },
      { kind: 'send_debit', balance: '-1000000' },
    ]);
    assert.deepEqual(await balance(), { balance: before.balance - 1_000_000n - replacementFee, locked: 0n }, 'debited once, every lock released');
    const outgoing = await ledgerMatchesChain();
    const spentByReplacement = outgoing.filter((transfer) => transfer.txid === done.tx_hash);
    assert.ok(spentByReplacement.length > 0, 'the replacement scanned going out');
    assert.deepEqual([...new Set(spentByReplacement.map((transfer) => transfer.transactionId))], [original.id], "as the send's");

    const again = await call('POST', `/v1/transactions/${original.id}/speed-up`, {});
    assert.equal(again.status, 409, again.text);
  });

  it('cancels a send in the mempool: its inputs paid back to the wallet, less a higher fee; the send fails as cancelled, only that fee debited', async () => {
    const before = await balance();
    const original = await waitingSend('0.02');
    const asked = await call('POST', `/v1/transactions/${original.id}/cancel`, {});
    assert.equal(asked.status, 200, asked.text);
    const cancelFee = BigInt((asked.body as Transaction).replacements[0]!.fee_limit_raw);
    assert.ok(cancelFee > BigInt(original.fee_limit_raw));

    const done = await settledOnReplacement(original.id);
    assert.deepEqual([done.status, done.failure_reason, done.recipient_amount_raw], ['failed', 'cancelled', '0']);
    assert.deepEqual([done.replacements[0]!.kind, done.replacements[0]!.status], ['cancel', 'mined']);
    const mined = await onNode(done.tx_hash!);
    assert.deepEqual(mined.outputs.map((output) => output.address), [nodeForm(wallet.primary)], 'one output, back to the wallet');
    assert.equal(mined.fee, cancelFee);
    const outputs = await outputsOf(original.id);
    assert.deepEqual(
      outputs.created.filter((row) => row.status !== 'unconfirmed').map((row) => [row.txid, row.vout, row.status, BigInt(row.amount)]),
      [[done.tx_hash, 0, 'available', mined.outputs[0]!.amount]],
      "the output back is spendable; the original's change never",
    );
    assert.deepEqual(await debits(original.id), [{ kind: 'fee_debit', balance: (-cancelFee).toString() }]);
    assert.deepEqual(await balance(), { balance: before.balance - cancelFee, locked: 0n });
    await ledgerMatchesChain();
  });

  it('bumps a send left unmined for FEE_BUMP_AFTER_BLOCKS blocks by itself: an automatic speed-up of the same inputs is mined, debited once', async () => {
    const before = await balance();
    const original = await waitingSend('0.01');
    const row = async () => (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id: original.id });
    await eventually(async () => ((await row()).waitingSinceHeight != null ? true : undefined), 'the wait counted from a height');
    await btcd.generate(BUMP_AFTER);
    assert.ok((await mempool()).includes(original.tx_hash!), 'no block took the send');

    const done = await settledOnReplacement(original.id);
    assert.equal(done.status, 'confirmed');
    const [bump] = done.replacements;
    assert.deepEqual([bump!.kind, bump!.origin, bump!.status], ['speed_up', 'automatic', 'mined']);
    assert.equal(done.tx_hash, bump!.tx_hash);
    const mined = await onNode(done.tx_hash!);
    const fee = BigInt(bump!.fee_limit_raw);
    assert.equal(mined.fee, fee);
    assert.ok(fee > BigInt(original.fee_limit_raw), 'priced above the send it replaced');
    assert.equal(mined.outputs[0]!.amount, 1_000_000n, 'the recipient paid once');
    assert.deepEqual(await balance(), { balance: before.balance - 1_000_000n - fee, locked: 0n }, 'debited once, every lock released');
    await ledgerMatchesChain();
  });

  it("never bumps a send past its own max_fee_rate; its caller may still cancel it", async () => {
    const before = await balance();
    const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outsideP2wpkh(), amount: '0.01', asset: 'BTC', fee_rate: '1', max_fee_rate: '1' });
    assert.equal(created.status, 201, created.text);
    const row = async () => (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id: created.body.id });
    await eventually(async () => ((await row()).waitingSinceHeight != null ? true : undefined), 'the wait counted from a height');
    await btcd.generate(BUMP_AFTER);
    const checks = async () => activitiesScheduled((await localTemporal()).client.workflow.getHandle(transactionWorkflowId(created.body.id)), 'checkTransaction');
    const checked = await checks();
    await eventually(async () => ((await checks()) >= checked + 2 ? true : undefined), 'two more checks');
    assert.deepEqual((await read(created.body.id)).replacements, [], 'no bump: at 1 sat/vB none can outbid the send');

    const cancelled = await call('POST', `/v1/transactions/${created.body.id}/cancel`, {});
    assert.equal(cancelled.status, 200, cancelled.text);
    const done = await settledOnReplacement(created.body.id);
    assert.deepEqual([done.status, done.failure_reason, done.replacements[0]!.origin], ['failed', 'cancelled', 'api']);
    assert.deepEqual(await balance(), { balance: before.balance - BigInt(done.fee_raw!), locked: 0n });
    await ledgerMatchesChain();
  });

  it('refuses a speed-up the change cannot pay (400 change_too_small), changing nothing; the original is then mined and debited once', async () => {
    await funded(100_000n);
    const before = await balance();
    // 2 sat/vB (what btcd's blocks take here) leaves a change just above the dust limit: any replacement's extra fee (at least 1 sat/vB more) takes it below.
    const spendable = await (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ txid: string; vout: number }[]>(`select txid, vout from wallet_outputs where wallet_id = ? and status = 'available' and amount = 100000`, [wallet.id]);
    assert.equal(spendable.length, 1);
    const created = await call('POST', '/v1/transactions', {
      wallet_id: wallet.id,
      to_address: outsideP2wpkh(),
      amount: '0.0009915',
      asset: 'BTC',
      fee_rate: '2',
      inputs: [{ txid: spendable[0]!.txid, vout: String(spendable[0]!.vout) }],
    });
    assert.equal(created.status, 201, created.text);
    const original = await eventually(async () => {
      const transaction = await read(created.body.id);
      return transaction.status === 'broadcast' && (await mempool()).includes(transaction.tx_hash!) ? transaction : undefined;
    }, 'the send in the mempool');
    const locked = (await balance()).locked;
    const refused = await call('POST', `/v1/transactions/${original.id}/speed-up`, { fee_rate: '3' });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.body.error.code, 'change_too_small');
    assert.equal((await balance()).locked, locked, 'nothing more locked');
    assert.deepEqual((await read(original.id)).replacements, [], 'no replacement recorded');

    const done = await settled(original.id);
    assert.equal(done.status, 'confirmed');
    assert.equal(done.tx_hash, original.tx_hash);
    const fee = BigInt(original.fee_limit_raw);
    assert.equal((await onNode(done.tx_hash!)).fee, fee);
    assert.deepEqual(await debits(original.id), [
      { kind: 'fee_debit', balance: (-fee).toString() },
      { kind: 'send_debit', balance: '-99150' },
    ]);
    assert.deepEqual(await balance(), { balance: before.balance - 99_150n - fee, locked: 0n });
    await ledgerMatchesChain();
  });
});
