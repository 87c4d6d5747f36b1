import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { secp256k1, schnorr } from '@noble/curves/secp256k1';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { ChainNodes } from '../../src/chains/nodes';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { chainScanWorkflowId, scanThroughUpdate } from '../../src/monitoring/flows/chain-scan';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { type TestApp, type TestOrganization } from '../support/app';
import { COINBASE_MATURITY, coinbaseOutput, payFromMiner, REGTEST_NETWORK, startBtcdOrSkip, type Btcd, btcdHeight, btcdSandboxConfig } from '../support/btcd';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 2;

interface Transaction {
  id: string;
  status: string;
  amount_raw: string;
  recipient_amount_raw: string;
  fee_raw: string | null;
  fee_limit_raw: string;
  fee_rate: string | null;
  max_fee_rate: string | null;
  tx_hash: string | null;
  inputs: { txid: string; vout: string }[] | null;
  inputs_used: { txid: string; vout: string; amount_raw: string }[];
  failure_reason: string | null;
}

interface Outpoint {
  txid: string;
  vout: number;
  amount: bigint;
}

/** An address nobody holds a key to in these tests (a fresh key's), in the sandbox (testnet) form the API takes. */
const outsideP2wpkh = () => btc.p2wpkh(secp256k1.getPublicKey(randomBytes(32), true), btc.TEST_NETWORK).address!;
const outsideP2tr = () => btc.p2tr(schnorr.getPublicKey(randomBytes(32)), undefined, btc.TEST_NETWORK).address!;
/** The regtest node writes addresses with its own bech32 prefix. */
const nodeForm = (address: string) => btc.Address(REGTEST_NETWORK).encode(btc.Address(btc.TEST_NETWORK).decode(address));

/** Sends from a custody wallet on a real Bitcoin node (btcd, regtest), through the API, Temporal and PostgreSQL. */
describe('Sends on a real Bitcoin node (btcd, regtest): coin control, fee rates, p2tr inputs, change', function () {
  let btcd: Btcd;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  let config: Record<string, string>;
  /** Coinbase outputs the miner key may spend, one per deposit. */
  let nextCoinbase = 1;

  before(async function () {
    btcd = await startBtcdOrSkip(this);
    await btcd.generate(COINBASE_MATURITY + 10);
    const taskQueue = `btcd-sends-${randomUUID()}`;
    config = btcdSandboxConfig(btcd, taskQueue, CONFIRMATIONS);
    service = await startScannedService('bitcoin', 'btcd sends', config, () => btcdHeight(btcd));
    ({ app, org } = service);
  });
  after(async () => {
    if (!btcd) return;
    await service?.stop();
    await btcd.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const read = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as Transaction;
  const send = (body: Record<string, unknown>) => call('POST', '/v1/transactions', body);
  async function sent(body: Record<string, unknown>): Promise<Transaction> {
    const created = await send(body);
    assert.equal(created.status, 201, created.text);
    return created.body as Transaction;
  }
  const balance = async (walletId: string) => {
    const row = (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data[0] as { balance: string; locked: string; pending: string };
    return { balance: BigInt(row.balance), locked: BigInt(row.locked), pending: BigInt(row.pending) };
  };
  async function scanned() {
    const height = Number(await btcd.call('getblockcount'));
    const handle = (await localTemporal()).client.workflow.getHandle(chainScanWorkflowId('bitcoin', 'sandbox'));
    const through = await handle.executeUpdate(scanThroughUpdate, { args: [{ height, waitSeconds: 30 }] });
    assert.ok(through.reached, 'scanning reached the tip');
  }
  /** Pays `amount` from a fresh coinbase output to `address` (sandbox form); the deposit's outpoint. */
  async function deposit(address: string, amount: bigint): Promise<Outpoint> {
    const payment = payFromMiner(await coinbaseOutput(btcd, nextCoinbase++), address, amount);
    await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    return { txid: payment.id, vout: 0, amount };
  }
  /** The transaction as the node has it: its inputs, its outputs (node address form) and the fee they imply, all from raw bytes. */
  async function onNode(txid: string) {
    const raw = btc.Transaction.fromRaw(hex.decode((await btcd.call('getrawtransaction', [txid, 0])) as string), { allowUnknownOutputs: true });
    const inputs: Outpoint[] = [];
    for (let index = 0; index < raw.inputsLength; index++) {
      const input = raw.getInput(index);
      const previous = btc.Transaction.fromRaw(hex.decode((await btcd.call('getrawtransaction', [hex.encode(input.txid!), 0])) as string), { allowUnknownOutputs: true });
      inputs.push({ txid: hex.encode(input.txid!), vout: input.index!, amount: previous.getOutput(input.index!).amount! });
    }
    const outputs = Array.from({ length: raw.outputsLength }, (_, index) => {
      const output = raw.getOutput(index);
      return { address: btc.Address(REGTEST_NETWORK).encode(btc.OutScript.decode(output.script!)), amount: output.amount! };
    });
    const fee = inputs.reduce((sum, input) => sum + input.amount, 0n) - outputs.reduce((sum, output) => sum + output.amount, 0n);
    const verbose = (await btcd.call('getrawtransaction', [txid, 1])) as { vsize: number; confirmations?: number };
    return { inputs, outputs, fee, vsize: verbose.vsize, confirmations: verbose.confirmations ?? 0 };
  }
  /** Mines a block at a time until every send is settled (each workflow checks every 5 s). */
  async function settleAll(ids: string[]): Promise<Transaction[]> {
    await eventually(async () => ((await Promise.all(ids.map(read))).every((transaction) => !['pending', 'signed'].includes(transaction.status)) ? true : undefined), 'every send broadcast', 30_000, 250);
    return eventually(
      async () => {
        const transactions = await Promise.all(ids.map(read));
        if (transactions.every((transaction) => ['confirmed', 'failed'].includes(transaction.status))) return transactions;
        await btcd.generate(1);
        return undefined;
      },
      'every send settled',
      60_000,
      1_000,
    );
  }
  /** The ledger invariant for the organization's wallet, once scanning has caught up with the tip. */
  async function ledgerMatchesChain() {
    await scanned();
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), await nodes.provider('bitcoin', 'sandbox'), { chain: 'bitcoin', environment: 'sandbox', organizationId: org.organizationId });
    assert.equal(result.wallets, 1);
    assert.deepEqual(result.mismatches, []);
  }
  const outpointsOf = (inputs: { txid: string; vout: string | number }[]) => inputs.map((input) => `${input.txid}:${input.vout}`).sort();

  let wallet: { id: string; primary: string; taproot: string };
  /** The deposits: two p2wpkh and one p2tr for exact pins, one for filling, one for a changeless remainder. */
  let deposits: Record<'segwit' | 'taproot' | 'small' | 'filler' | 'exact', Outpoint>;

  it('credits deposits to a p2wpkh and a p2tr address of one wallet once confirmed', async () => {
    const vault = await call('POST', '/v1/vaults', { name: 'BTC' });
    const created = await call('POST', '/v1/wallets', { name: 'BTC', chain: 'bitcoin', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    const taproot = await call('POST', `/v1/wallets/${created.body.id}/addresses`, { address_format: 'p2tr' });
    assert.equal(taproot.status, 201, taproot.text);
    assert.equal(taproot.body.format, 'p2tr');
    assert.match(taproot.body.address, /^tb1p/);
    wallet = { id: created.body.id, primary: created.body.primary_address.address, taproot: taproot.body.address };

    deposits = {
      segwit: await deposit(wallet.primary, 30_000_000n),
      taproot: await deposit(wallet.taproot, 20_000_000n),
      small: await deposit(wallet.primary, 10_000_000n),
      filler: await deposit(wallet.primary, 15_000_000n),
      exact: await deposit(wallet.taproot, 10_000_000n),
    };
    await btcd.generate(1);
    await scanned();
    assert.equal((await balance(wallet.id)).pending, 85_000_000n);
    await btcd.generate(CONFIRMATIONS - 1);
    await eventually(async () => ((await balance(wallet.id)).balance === 85_000_000n ? true : undefined), 'the deposits credited');
  });

  it('refuses pins that do not cover amount and fee without fill, and a fee rate above max_fee_rate, locking nothing', async () => {
    const pin = (outpoint: Outpoint) => ({ txid: outpoint.txid, vout: String(outpoint.vout) });
    const short = await send({ wallet_id: wallet.id, to_address: outsideP2wpkh(), amount: '0.2', asset: 'BTC', inputs: [pin(deposits.small)], fee_rate: '2' });
    assert.equal(short.status, 400, short.text);
    assert.equal(short.body.error.code, 'pinned_inputs_insufficient');
    assert.equal(short.body.error.param, 'inputs');

    const aboveMax = await send({ wallet_id: wallet.id, to_address: outsideP2wpkh(), amount: '0.01', asset: 'BTC', fee_rate: '20', max_fee_rate: '10' });
    assert.equal(aboveMax.status, 400, aboveMax.text);
    assert.equal(aboveMax.body.error.code, 'fee_rate_above_max');
    assert.equal(aboveMax.body.error.param, 'max_fee_rate');

    // A remainder too small for change would go to the miner: 10,000,000 sat less 9,999,280 leaves 720 sat, over 7 sat/vB on the 99 vB a p2tr input and one output make.
    const remainder = await send({ wallet_id: wallet.id, to_address: outsideP2wpkh(), amount: '0.0999928', asset: 'BTC', inputs: [pin(deposits.exact)], fee_rate: '2', max_fee_rate: '2' });
    assert.equal(remainder.status, 400, remainder.text);
    assert.equal(remainder.body.error.code, 'fee_rate_above_max');

    assert.equal((await balance(wallet.id)).locked, 0n);
  });

  let changeOfExactPin: Outpoint;

  it('spends exactly the pinned inputs (a p2wpkh, a p2tr), pins plus others with fill_fee_from_unselected, at the fee rate asked; btcd accepts and mines them', async () => {
    const before = await balance(wallet.id);
    const pin = (outpoint: Outpoint) => ({ txid: outpoint.txid, vout: String(outpoint.vout) });
    const to = { segwit: outsideP2wpkh(), taproot: outsideP2tr(), filled: outsideP2wpkh() };
    const exact = await sent({ wallet_id: wallet.id, to_address: to.segwit, amount: '0.1', asset: 'BTC', inputs: [pin(deposits.segwit)], fee_rate: '3' });
    const taproot = await sent({ wallet_id: wallet.id, to_address: to.taproot, amount: '0.05', asset: 'BTC', inputs: [pin(deposits.taproot)], fee_rate: '4', max_fee_rate: '4' });
    const filled = await sent({ wallet_id: wallet.id, to_address: to.filled, amount: '0.2', asset: 'BTC', inputs: [pin(deposits.small)], fill_fee_from_unselected: true, fee_rate: '2' });
    assert.deepEqual(outpointsOf(exact.inputs_used), outpointsOf([deposits.segwit]), 'exactly the pinned input');
    assert.deepEqual(outpointsOf(taproot.inputs_used), outpointsOf([deposits.taproot]));
    assert.deepEqual(
      outpointsOf(filled.inputs_used),
      outpointsOf([deposits.small, deposits.filler]),
      'the pin, and the only other spendable output large enough (the rest are locked by the sends before it)',
    );
    const created = [exact, taproot, filled];
    assert.equal((await balance(wallet.id)).locked, created.reduce((sum, transaction) => sum + BigInt(transaction.amount_raw) + BigInt(transaction.fee_limit_raw), 0n));

    // The change is recorded when the send is signed, and cannot be spent before the send confirms.
    const signed = await eventually(async () => (await read(exact.id)).tx_hash ?? undefined, 'the exact-pin send signed');
    const early = await send({ wallet_id: wallet.id, to_address: outsideP2wpkh(), amount: '0.01', asset: 'BTC', inputs: [{ txid: signed, vout: '1' }] });
    assert.equal(early.status, 400, early.text);
    assert.equal(early.body.error.code, 'input_not_spendable');
    assert.equal(early.body.error.details.status, 'unconfirmed');

    // Mined, short of the confirmations: the ledger still equals the chain, the sends' debits not yet booked.
    await eventually(async () => ((await Promise.all(created.map((transaction) => read(transaction.id)))).every((transaction) => transaction.status === 'broadcast') ? true : undefined), 'every send broadcast', 20_000, 250);
    await btcd.generate(1);
    await eventually(async () => ((await Promise.all(created.map((transaction) => read(transaction.id)))).every((transaction) => transaction.status === 'confirming') ? true : undefined), 'every send mined', 30_000, 250);
    await ledgerMatchesChain();

    const settled = await settleAll(created.map((transaction) => transaction.id));
    assert.deepEqual(
      settled.map((transaction) => transaction.status),
      ['confirmed', 'confirmed', 'confirmed'],
    );
    const primaryOnNode = nodeForm(wallet.primary);
    for (const [index, transaction] of settled.entries()) {
      const node = await onNode(transaction.tx_hash!);
      const rate = BigInt(created[index]!.fee_rate!);
      assert.ok(node.confirmations >= CONFIRMATIONS);
      assert.deepEqual(outpointsOf(node.inputs), outpointsOf(transaction.inputs_used), 'the node spent exactly the inputs the API shows');
      assert.equal(node.fee, BigInt(transaction.fee_raw!), "fee_raw is what the node's inputs less outputs leave");
      assert.equal(BigInt(transaction.fee_raw!) % rate, 0n, 'the fee is the rate times a whole size');
      const paidFor = Number(BigInt(transaction.fee_raw!) / rate);
      assert.ok(paidFor >= node.vsize && paidFor <= node.vsize + 1, `the fee pays ${paidFor} vB at ${rate} sat/vB for a ${node.vsize} vB transaction`);
      const max = transaction.max_fee_rate;
      if (max !== null) assert.ok(node.fee <= BigInt(max) * BigInt(node.vsize), "the fee respects max_fee_rate on the node's own size");
      const recipient = [to.segwit, to.taproot, to.filled][index]!;
      assert.deepEqual(node.outputs[0], { address: nodeForm(recipient), amount: BigInt(transaction.amount_raw) });
      const spent = node.inputs.reduce((sum, input) => sum + input.amount, 0n);
      assert.deepEqual(node.outputs[1], { address: primaryOnNode, amount: spent - BigInt(transaction.amount_raw) - node.fee }, 'the change returns to the primary address');
      assert.equal(node.outputs.length, 2);
    }
    changeOfExactPin = { txid: settled[0]!.tx_hash!, vout: 1, amount: (await onNode(settled[0]!.tx_hash!)).outputs[1]!.amount };

    const after = await balance(wallet.id);
    const debited = settled.reduce((sum, transaction) => sum + BigInt(transaction.amount_raw) + BigInt(transaction.fee_raw!), 0n);
    assert.equal(after.balance, before.balance - debited, 'debited the amounts and the fees exactly');
    assert.equal(after.locked, 0n);
  });

  it('the change is no deposit, and is spendable once its send confirmed: a pinned p2wpkh change output', async () => {
    const listed = (await call('GET', `/v1/deposits?wallet_id=${wallet.id}`)).body.data as { tx_hash: string }[];
    assert.equal(listed.length, 5, 'the five deposits only');
    const sends = (await call('GET', `/v1/transactions?wallet_id=${wallet.id}`)).body.data as Transaction[];
    assert.ok(!listed.some((row) => sends.some((transaction) => transaction.tx_hash === row.tx_hash)), 'no send of ours is listed as a deposit');

    const before = await balance(wallet.id);
    const spend = await sent({ wallet_id: wallet.id, to_address: outsideP2tr(), amount: '0.05', asset: 'BTC', inputs: [{ txid: changeOfExactPin.txid, vout: '1' }], fee_rate: '5' });
    assert.deepEqual(outpointsOf(spend.inputs_used), [`${changeOfExactPin.txid}:1`]);
    const [settled] = await settleAll([spend.id]);
    assert.equal(settled!.status, 'confirmed');
    const node = await onNode(settled!.tx_hash!);
    assert.deepEqual(outpointsOf(node.inputs), [`${changeOfExactPin.txid}:1`]);
    assert.equal(node.inputs[0]!.amount, changeOfExactPin.amount);
    assert.equal((await balance(wallet.id)).balance, before.balance - BigInt(settled!.amount_raw) - BigInt(settled!.fee_raw!));
    assert.equal(((await call('GET', `/v1/deposits?wallet_id=${wallet.id}`)).body.data as unknown[]).length, 5, 'still the five deposits');
  });

  it("keeps the ledger invariant after the mix: the wallet's ledger equals what btcd says its addresses hold", async () => {
    await btcd.generate(1);
    await ledgerMatchesChain();
    const cursor = await (await testOrm()).em.fork().findOneOrFail(ChainScanCursor, { chain: 'bitcoin', environment: 'sandbox' });
    assert.equal(cursor.height, Number(await btcd.call('getblockcount')));
  });
});
