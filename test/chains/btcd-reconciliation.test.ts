import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { secp256k1 } from '@noble/curves/secp256k1';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { ChainNodes } from '../../src/chains/nodes';
import { NodeUnavailableError } from '../../src/chains/provider';
import { chainScanWorkflowId, scanThroughUpdate } from '../../src/monitoring/flows/chain-scan';
import { btcdHeight, btcdSandboxConfig, coinbaseOutput, COINBASE_MATURITY, payFromMiner, startBtcdOrSkip, type Btcd } from '../support/btcd';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { creditCustodyWallet } from '../support/ledger';
import { createHotWallet, driftEventsOf, organizationDrifts, startReconciliationPass, walletBalances, type DriftRow } from '../support/reconciliation';
import { startScannedService, type ScannedService } from '../support/scanned-service';
import { testLogger } from '../support/secret-scan';
import { WebhookReceiver } from '../support/webhook-receiver';

const CONFIRMATIONS = 2;
const BTC = 100_000_000n;

/**
 * The ledger reconciliation of Bitcoin through the real scanner, sends, Temporal, PostgreSQL and
 * webhooks, against btcd WITHOUT an address index (as Bitcoin Core, which has none): each wallet's
 * ledger, its outputs in the UTXO table and the node's unspent set (gettxout) at the scanner's block.
 */
describe('Ledger reconciliation on Bitcoin (btcd without an address index): the UTXO set at the scanned block', function () {
  let btcd: Btcd;
  let service: ScannedService;
  let config: Record<string, string>;
  const receiver = new WebhookReceiver();
  /** Coinbase outputs the miner key may spend, one per deposit. */
  let nextCoinbase = 1;

  before(async function () {
    btcd = await startBtcdOrSkip(this, [], { addressIndex: false });
    await btcd.generate(COINBASE_MATURITY + 10);
    await receiver.start();
    config = { ...btcdSandboxConfig(btcd, `btcd-reconciliation-${randomUUID()}`, CONFIRMATIONS), LEDGER_RECONCILIATION_HOLDERS_PER_PAGE: '2' };
    service = await startScannedService('bitcoin', 'btcd reconciliation', config, () => btcdHeight(btcd));
    const endpoint = await service.call('POST', '/v1/webhooks', { name: 'drifts', url: receiver.url, event_types: ['ledger.drift'] });
    receiver.secrets = [endpoint.body.signing_secret];
  });
  after(async () => {
    await receiver.close();
    if (!btcd) return;
    await service?.stop();
    await btcd.stop();
  });

  const wallets: { id: string; address: string }[] = [];
  const createWallet = async (name: string) => {
    const wallet = await createHotWallet(service, name, 'bitcoin');
    wallets.push(wallet);
    return wallet;
  };
  const btcOf = async (walletId: string) => (await walletBalances(service, walletId)).BTC ?? 0n;
  /** Pays `amount` satoshis from a fresh coinbase output to `address` (sandbox form); the coinbase output it spent. */
  async function deposit(address: string, amount: bigint) {
    const spent = await coinbaseOutput(btcd, nextCoinbase++);
    await btcd.call('sendrawtransaction', [hex.encode(payFromMiner(spent, address, amount).extract())]);
    return spent;
  }
  async function scanned() {
    const handle = (await localTemporal()).client.workflow.getHandle(chainScanWorkflowId('bitcoin', 'sandbox'));
    assert.ok((await handle.executeUpdate(scanThroughUpdate, { args: [{ height: await btcdHeight(btcd), waitSeconds: 30 }] })).reached, 'scanning reached the tip');
  }
  /** One whole pass over the organization's wallets at the scanner's block (retried while the scanner has not reached the node's tip). */
  const pass = () =>
    eventually(async () => {
      const handle = await startReconciliationPass({ chain: 'bitcoin', environment: 'sandbox', organizationId: service.org.organizationId }, config.TEMPORAL_TASK_QUEUE!);
      const result = (await handle.result()) as { compared: number; skipped?: string };
      return result.skipped ? undefined : result;
    }, 'a pass with the scanner at the node tip');
  const drifts = () => organizationDrifts(service.org.organizationId);
  const unresolved = async () => (await drifts()).filter((drift) => drift.status !== 'resolved');
  /** A pass after scanning reached the tip: every wallet compared, no drift. */
  async function agrees(stage: string) {
    await scanned();
    assert.deepEqual(await pass(), { compared: wallets.length }, `${stage}: every wallet compared`);
    assert.deepEqual(await unresolved(), [], `${stage}: ledger, UTXO table and node agree`);
  }
  const transaction = async (id: string) => (await service.call('GET', `/v1/transactions/${id}`)).body as { status: string; tx_hash: string | null; amount_raw: string; fee_raw: string | null };

  let spender: { id: string; address: string };
  let receiving: { id: string; address: string };
  /** The coinbase output the spender's first deposit spent: spent on the node. */
  let spentCoinbase: { txid: string; index: number };

  it('a wallet funded and spent through the platform agrees with the node at every stage, with no address index on the node', async () => {
    spender = await createWallet('Spender');
    receiving = await createWallet('Receiving');
    spentCoinbase = await deposit(spender.address, BTC / 2n);
    await deposit(spender.address, (3n * BTC) / 10n);
    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await btcOf(spender.id)) === (8n * BTC) / 10n ? true : undefined), 'the deposits credited');
    // Mined and not confirmed: the UTXO table's unconfirmed output is on the chain at the block.
    await deposit(receiving.address, BTC / 5n);
    await btcd.generate(1);
    await agrees('deposits confirmed and one mined unconfirmed');

    const created = await service.call('POST', '/v1/transactions', {
      wallet_id: spender.id,
      to_address: btc.p2wpkh(secp256k1.getPublicKey(randomBytes(32), true), btc.TEST_NETWORK).address,
      amount: '0.1',
      asset: 'BTC',
      fee_rate: '2',
    });
    assert.equal(created.status, 201, created.text);
    const sendId = created.body.id as string;
    await eventually(async () => ((await transaction(sendId)).status === 'broadcast' ? true : undefined), 'the send broadcast', 30_000, 250);
    await agrees('the send in the mempool: its inputs locked and unspent, its change not mined');

    await btcd.generate(1);
    await agrees('the send mined, not settled: its inputs spent, its change unconfirmed on the chain');

    await btcd.generate(1);
    const settled = await eventually(async () => {
      const found = await transaction(sendId);
      return found.status === 'confirmed' ? found : undefined;
    }, 'the send settled', 30_000, 250);
    await agrees('the send settled: its change available');
    assert.equal(await btcOf(spender.id), (7n * BTC) / 10n - BigInt(settled.fee_raw!), 'the ledger paid the amount and the fee');

    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const provider = await nodes.provider('bitcoin', 'sandbox');
    await assert.rejects(provider.balance(spender.address, 'BTC'), (error) => error instanceof NodeUnavailableError && /address index/.test(error.message), 'the node has no address index to read');
  });

  it("reads the node's unspent outputs at a pinned block in batches: exact amounts, null once spent or while unmined, nothing at a block that is not the tip", async () => {
    const provider = await new ChainNodes(testConfig(config), testLogger('test'), await testOrm()).provider('bitcoin', 'sandbox');
    const before = await btcOf(spender.id);
    const tip = async () => ({ height: await btcdHeight(btcd), hash: (await btcd.call('getbestblockhash')) as string });
    // More than one batch (100 a batch): two answers that are null, then unspent coinbase outputs of the blocks mined empty at the start.
    const coinbases = [];
    for (let height = 10; height < 110; height++) coinbases.push(await coinbaseOutput(btcd, height));
    const unmined = payFromMiner(await coinbaseOutput(btcd, nextCoinbase++), spender.address, BTC / 10n);
    await btcd.call('sendrawtransaction', [hex.encode(unmined.extract())]);
    const outpoints = [{ txid: spentCoinbase.txid, vout: spentCoinbase.index }, { txid: unmined.id, vout: 0 }, ...coinbases.map(({ txid, index }) => ({ txid, vout: index }))];
    const pinned = await tip();
    assert.deepEqual(await provider.unspentOutputsAt!(outpoints, pinned), [null, null, ...coinbases.map((coinbase) => coinbase.amount)]);
    await btcd.generate(1);
    assert.equal(await provider.unspentOutputsAt!(outpoints, pinned), null, 'read at another block than the pinned one: no answer');
    assert.deepEqual((await provider.unspentOutputsAt!(outpoints.slice(0, 2), await tip()))!, [null, BTC / 10n], 'mined now');
    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await btcOf(spender.id)) === before + BTC / 10n ? true : undefined), 'the deposit credited');
  });

  it('finds an output the node has spent, a ledger moved by a balanced posting and an output removed from the table within one pass; resolves them once put back', async () => {
    const emptied = await createWallet('Emptied');
    await deposit(emptied.address, BTC / 4n);
    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await btcOf(emptied.id)) === BTC / 4n ? true : undefined), 'the deposit credited');
    await agrees('before the plants');
    const held = { spender: await btcOf(spender.id), receiving: await btcOf(receiving.id) };

    const em = (await testOrm()).em.fork();
    const planted = 12_345n;
    // An available output of the spender the node has spent (the coinbase output its first deposit spent).
    await em.execute(
      `insert into wallet_outputs (id, organization_id, environment, wallet_id, address_id, txid, vout, amount, origin, status, created_at, updated_at)
       select gen_random_uuid(), organization_id, environment, wallet_id, address_id, ?, ?, ?, 'deposit', 'available', now(), now() from wallet_outputs where wallet_id = ? limit 1`,
      [spentCoinbase.txid, spentCoinbase.index, planted.toString(), spender.id],
    );
    // The receiving wallet's ledger ahead of its outputs, by a balanced posting.
    await creditCustodyWallet(em, receiving.id, 'BTC', planted);
    // The emptied wallet's only output gone from the table.
    const [removed] = await em.execute<Record<string, unknown>[]>(`delete from wallet_outputs where wallet_id = ? returning *`, [emptied.id]);

    assert.deepEqual(await pass(), { compared: 3 });
    const expected: DriftRow[] = [
      { wallet_id: spender.id, asset_id: 'BTC', figure: 'utxo_set', status: 'open', ledger_amount: (held.spender + planted).toString(), chain_amount: held.spender.toString() },
      { wallet_id: receiving.id, asset_id: 'BTC', figure: 'balance', status: 'open', ledger_amount: (held.receiving + planted).toString(), chain_amount: held.receiving.toString() },
      { wallet_id: emptied.id, asset_id: 'BTC', figure: 'balance', status: 'open', ledger_amount: (BTC / 4n).toString(), chain_amount: '0' },
    ];
    const byWallet = (a: DriftRow, b: DriftRow) => (a.wallet_id < b.wallet_id ? -1 : 1);
    assert.deepEqual(await drifts(), expected.sort(byWallet), 'the three plants, found in one pass, and nothing else');
    await eventually(async () => (driftEventsOf(receiver).length === 3 ? true : undefined), 'a ledger.drift per drift');
    assert.deepEqual(driftEventsOf(receiver).map((event) => `${event.data.wallet_id}:${event.data.figure}`).sort(), expected.map((drift) => `${drift.wallet_id}:${drift.figure}`).sort());

    // Put back: the next pass finds every figure agreeing again.
    await em.execute(`delete from wallet_outputs where txid = ? and vout = ? and wallet_id = ?`, [spentCoinbase.txid, spentCoinbase.index, spender.id]);
    await creditCustodyWallet(em, receiving.id, 'BTC', -planted);
    await em.execute(
      `insert into wallet_outputs (id, organization_id, environment, wallet_id, address_id, txid, vout, amount, origin, status, created_at, updated_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ['id', 'organization_id', 'environment', 'wallet_id', 'address_id', 'txid', 'vout', 'amount', 'origin', 'status', 'created_at', 'updated_at'].map((column) => removed![column]),
    );
    assert.deepEqual(await pass(), { compared: 3 });
    assert.deepEqual((await drifts()).map((drift) => drift.status), ['resolved', 'resolved', 'resolved']);
  });
});
