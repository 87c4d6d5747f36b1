import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { secp256k1 } from '@noble/curves/secp256k1';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { ChainNodes } from '../../src/chains/nodes';
import { IncomingTransfer, OutgoingTransfer } from '../../src/monitoring/entities';
import { chainScanWorkflowId, scanThroughUpdate } from '../../src/monitoring/flows/chain-scan';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { WalletOutput } from '../../src/transactions/entities';
import { type TestApp, type TestOrganization } from '../support/app';
import { COINBASE_MATURITY, coinbaseOutput, payFromMiner, startBtcdOrSkip, type Btcd, btcdHeight, btcdSandboxConfig } from '../support/btcd';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { suspenseBalance } from '../support/ledger';
import { testLogger } from '../support/secret-scan';
import { WebhookReceiver } from '../support/webhook-receiver';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 2;
/** What the outside spend leaves to the miner. */
const OUTSIDE_FEE = 2_000n;

interface Delivered {
  type: string;
  data: Record<string, unknown>;
}

/** An address nobody holds a key to in these tests, in the sandbox (testnet) form. */
const outsideP2wpkh = () => btc.p2wpkh(secp256k1.getPublicKey(randomBytes(32), true), btc.TEST_NETWORK).address!;

/** Spends of custody outputs on a real Bitcoin node (btcd, regtest): scanned, recorded, announced, and debited when the platform did not make them. */
describe('Outgoing transfers on a real Bitcoin node (btcd, regtest): a spend signed outside the send path is debited and announced; a platform send is announced and debited once', function () {
  let btcd: Btcd;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  let config: Record<string, string>;
  const receiver = new WebhookReceiver();

  before(async function () {
    btcd = await startBtcdOrSkip(this);
    await btcd.generate(COINBASE_MATURITY + 5);
    await receiver.start();
    const taskQueue = `btcd-outgoing-${randomUUID()}`;
    config = btcdSandboxConfig(btcd, taskQueue, CONFIRMATIONS);
    service = await startScannedService('bitcoin', 'btcd outgoing', config, () => btcdHeight(btcd));
    ({ app, org } = service);
  });
  after(async () => {
    if (!btcd) return;
    await service?.stop();
    await receiver.close();
    await btcd.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
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
  async function ledgerMatchesChain() {
    await scanned();
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), await nodes.provider('bitcoin', 'sandbox'), { chain: 'bitcoin', environment: 'sandbox', organizationId: org.organizationId });
    assert.equal(result.wallets, 1);
    assert.deepEqual(result.mismatches, []);
  }
  const delivered = (txid: string) => receiver.attempts.map((attempt) => JSON.parse(attempt.body) as Delivered).filter((event) => event.data.tx_hash === txid);
  const outgoingRows = async (txid: string) => (await testOrm()).em.fork().find(OutgoingTransfer, { txid }, { orderBy: { position: 'asc' } });

  /**
   * Spends a p2wpkh output of the wallet's primary address to `outputs` (sandbox addresses) outside the
   * send path: the sighash signed by the wallet's key through POST /v1/wallets/:id/sign (no_op), the
   * transaction assembled and handed to btcd here.
   */
  async function spendOutside(spent: { txid: string; vout: number; amount: bigint }, outputs: [string, bigint][], options: { replaceable?: boolean } = {}): Promise<btc.Transaction> {
    const script = btc.OutScript.encode(btc.Address(btc.TEST_NETWORK).decode(wallet.primary));
    const transaction = new btc.Transaction();
    // BIP-125: a sequence below 0xfffffffe lets a spend of the same output paying more replace it in the mempool.
    transaction.addInput({ txid: spent.txid, index: spent.vout, witnessUtxo: { script, amount: spent.amount }, ...(options.replaceable ? { sequence: 0xfffffffd } : {}) });
    for (const [address, amount] of outputs) transaction.addOutputAddress(address, amount, btc.TEST_NETWORK);
    const keyHash = btc.OutScript.decode(script) as { type: 'wpkh'; hash: Uint8Array };
    const sighash = transaction.preimageWitnessV0(0, btc.OutScript.encode({ type: 'pkh', hash: keyHash.hash }), btc.SigHash.ALL, spent.amount);
    const signed = await call('POST', `/v1/wallets/${wallet.id}/sign`, { payload: hex.encode(sighash), payload_encoding: 'hexadecimal', hash_function: 'no_op' });
    assert.equal(signed.status, 200, signed.text);
    const der = secp256k1.Signature.fromCompact(hex.decode(signed.body.signature as string).slice(0, 64)).toDERRawBytes();
    transaction.updateInput(0, { partialSig: [[hex.decode(signed.body.public_key as string), new Uint8Array([...der, btc.SigHash.ALL])]] });
    transaction.finalize();
    await btcd.call('sendrawtransaction', [hex.encode(transaction.extract())]);
    return transaction;
  }

  /** A confirmed deposit of `amount` from the coinbase of block `height` to the wallet's primary address: its outpoint. */
  async function depositFromMiner(height: number, amount: bigint) {
    const before = (await balance(wallet.id)).balance;
    const payment = payFromMiner(await coinbaseOutput(btcd, height), wallet.primary, amount);
    await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await balance(wallet.id)).balance === before + amount ? true : undefined), 'the deposit credited');
    return { txid: payment.id, vout: 0, amount };
  }
  /** A send of `amount` BTC through the API spending `inputs`, once a node holds it: its id. */
  async function broadcastSend(inputs: { txid: string; vout: string }[], amount: string): Promise<string> {
    const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outsideP2wpkh(), amount, asset: 'BTC', inputs, fee_rate: '2' });
    assert.equal(created.status, 201, created.text);
    await eventually(async () => ((await call('GET', `/v1/transactions/${created.body.id}`)).body.status === 'broadcast' ? true : undefined), 'the send broadcast', 30_000, 250);
    return created.body.id as string;
  }
  /** The same, then mined and settled: its id and the block carrying it. */
  async function settledSend(inputs: { txid: string; vout: string }[], amount: string) {
    const id = await broadcastSend(inputs, amount);
    const [carrying] = await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await readSend(id)).status === 'confirmed' ? true : undefined), 'the send settled', 60_000, 500);
    return { id, carrying: carrying! };
  }
  /**
   * A reorganisation from block `carrying` on: the key spends `input` elsewhere (all but a fee to an outside
   * address), `blocks` are mined on the new chain, and scanning debits that spend as unexpected.
   */
  async function conflictOnNewChain(carrying: string, input: { txid: string; vout: number; amount: bigint }, blocks: number) {
    await btcd.call('invalidateblock', [carrying]);
    const conflict = await spendOutside(input, [[outsideP2wpkh(), input.amount - 50_000n]]);
    await btcd.generate(blocks);
    await eventually(async () => ((await outgoingRows(conflict.id)).length === 1 ? true : undefined), 'the conflicting spend debited as unexpected');
  }
  const readSend = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as { status: string; failure_reason: string | null; block_height: number | null };
  /** Mines a block each try until `done` holds (a proof must hold for the confirmation count of blocks from where a pass first saw it). */
  const mineUntil = (done: () => Promise<boolean>, what: string) =>
    eventually(
      async () => {
        if (await done()) return true;
        await btcd.generate(1);
        return undefined;
      },
      what,
      60_000,
      1_000,
    );

  let wallet: { id: string; primary: string };
  /** The deposits' outpoints. */
  const deposits: { txid: string; vout: number; amount: bigint }[] = [];

  it('debits an output the wallet\'s key spent outside the send path (signed through POST /v1/wallets/:id/sign): ledger = chain, the outgoing event and wallet.unexpected_spend delivered once', async () => {
    const vault = await call('POST', '/v1/vaults', { name: 'BTC outgoing' });
    const created = await call('POST', '/v1/wallets', { name: 'BTC outgoing', chain: 'bitcoin', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    wallet = { id: created.body.id, primary: created.body.primary_address.address };
    const endpoint = await call('POST', '/v1/webhooks', { name: 'all', url: receiver.url });
    receiver.secrets = [endpoint.body.signing_secret];
    for (const [height, amount] of [[1, 30_000_000n], [2, 20_000_000n]] as const) {
      const payment = payFromMiner(await coinbaseOutput(btcd, height), wallet.primary, amount);
      await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
      deposits.push({ txid: payment.id, vout: 0, amount });
    }
    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await balance(wallet.id)).balance === 50_000_000n ? true : undefined), 'the deposits credited');

    // The wallet's key signs a spend of the first deposit the platform never asked for: 0.1 BTC out, the rest back to the wallet.
    const spent = deposits[0]!;
    const change = spent.amount - 10_000_000n - OUTSIDE_FEE;
    const transaction = await spendOutside(spent, [
      [outsideP2wpkh(), 10_000_000n],
      [wallet.primary, change],
    ]);
    await btcd.generate(1);
    await ledgerMatchesChain();

    const rows = await outgoingRows(transaction.id);
    assert.deepEqual(
      rows.map((row) => [row.position, row.assetId, row.amount, row.unexpected, row.transactionId ?? null, row.fromAddress]),
      [[`in:${spent.txid}:0`, 'BTC', spent.amount.toString(), true, null, wallet.primary]],
    );
    const output = await (await testOrm()).em.fork().findOneOrFail(WalletOutput, { txid: spent.txid, vout: 0 });
    assert.equal(output.status, 'spent', 'never selected again');
    const afterSpend = await balance(wallet.id);
    assert.equal(afterSpend.balance, 20_000_000n, 'the spent output debited');
    assert.equal(afterSpend.pending, change, 'what came back is a deposit');

    const events = await eventually(async () => (delivered(transaction.id).length >= 3 ? delivered(transaction.id) : undefined), 'the spend announced');
    assert.deepEqual(events.map((event) => event.type).sort(), ['incoming_native_tx', 'outgoing_native_tx', 'wallet.unexpected_spend']);
    const outgoing = events.find((event) => event.type === 'outgoing_native_tx')!.data;
    assert.equal(outgoing.amount_raw, spent.amount.toString());
    assert.equal(outgoing.unexpected, true);
    const spend = events.find((event) => event.type === 'wallet.unexpected_spend')!.data;
    assert.deepEqual(spend.debits, [{ asset: 'BTC', asset_id: 'BTC', amount: '0.3', amount_raw: '30000000' }]);

    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await balance(wallet.id)).balance === 20_000_000n + change ? true : undefined), 'the change confirmed as a deposit');
    await ledgerMatchesChain();
  });

  it('a platform send is recorded as the platform\'s, announced per input and debited once (by its settlement)', async () => {
    const before = await balance(wallet.id);
    const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outsideP2wpkh(), amount: '0.05', asset: 'BTC' });
    assert.equal(created.status, 201, created.text);
    await eventually(async () => ((await call('GET', `/v1/transactions/${created.body.id}`)).body.status === 'broadcast' ? true : undefined), 'the send broadcast', 30_000, 250);
    await btcd.generate(1);
    const settled = await eventually(
      async () => {
        const read = (await call('GET', `/v1/transactions/${created.body.id}`)).body as { status: string; fee_raw: string; tx_hash: string; inputs_used: { txid: string; vout: string; amount_raw: string }[] };
        if (read.status === 'confirmed') return read;
        await btcd.generate(1);
        return undefined;
      },
      'the send settled',
      60_000,
      1_000,
    );
    await ledgerMatchesChain();
    assert.equal((await balance(wallet.id)).balance, before.balance - 5_000_000n - BigInt(settled.fee_raw), 'debited once');

    const rows = await outgoingRows(settled.tx_hash);
    assert.deepEqual(rows.map((row) => row.position).sort(), settled.inputs_used.map((input) => `in:${input.txid}:${input.vout}`).sort(), 'one row per input');
    assert.ok(rows.every((row) => !row.unexpected && row.transactionId === created.body.id));
    const events = await eventually(async () => {
      const announced = delivered(settled.tx_hash).filter((event) => event.type === 'outgoing_native_tx');
      return announced.length === rows.length ? delivered(settled.tx_hash) : undefined;
    }, 'the send announced');
    assert.ok(events.filter((event) => event.type === 'outgoing_native_tx').every((event) => event.data.transaction_id === created.body.id));
    assert.equal(events.filter((event) => event.type === 'wallet.unexpected_spend').length, 0);
  });

  it('an output a pending send holds, spent outside the platform by a replacement: debited once, and the send fails on that proof with its lock released; ledger = chain', async () => {
    const start = await balance(wallet.id);
    const payment = payFromMiner(await coinbaseOutput(btcd, 3), wallet.primary, 40_000_000n);
    await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    const held = { txid: payment.id, vout: 0, amount: 40_000_000n };
    await btcd.generate(CONFIRMATIONS);
    const before = await eventually(async () => {
      const read = await balance(wallet.id);
      return read.balance === start.balance + held.amount ? read : undefined;
    }, 'the deposit credited');

    const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outsideP2wpkh(), amount: '0.1', asset: 'BTC', inputs: [{ txid: held.txid, vout: '0' }], fee_rate: '2' });
    assert.equal(created.status, 201, created.text);
    await eventually(async () => ((await call('GET', `/v1/transactions/${created.body.id}`)).body.status === 'broadcast' ? true : undefined), 'the send broadcast', 30_000, 250);
    // The key replaces the send in the node's mempool (it signals BIP-125) by a spend of the same output paying more.
    const replacement = await spendOutside(held, [[outsideP2wpkh(), held.amount - 50_000n]]);
    await btcd.generate(1);
    await scanned();
    const [row, ...others] = await outgoingRows(replacement.id);
    assert.equal(others.length, 0);
    assert.deepEqual([row!.position, row!.amount, row!.unexpected], [`in:${held.txid}:0`, held.amount.toString(), true]);

    const failed = await eventually(async () => {
      const read = (await call('GET', `/v1/transactions/${created.body.id}`)).body as { status: string; failure_reason: string | null };
      return read.status === 'failed' ? read : undefined;
    }, 'the send failed on the proof', 60_000, 500);
    assert.equal(failed.failure_reason, 'inputs_spent');
    const after = await balance(wallet.id);
    assert.equal(after.balance, before.balance - held.amount, 'the output debited once, by scanning');
    assert.equal(after.locked, 0n, 'the send released its lock');
    const output = await (await testOrm()).em.fork().findOneOrFail(WalletOutput, { txid: held.txid, vout: 0 });
    assert.equal(output.status, 'spent');
    await ledgerMatchesChain();
  });

  it('a spend made outside the platform, reorganised out, whose output another spend took on the new chain: its debit returns to the wallet once that spend is final, its change written off; ledger = chain', async () => {
    const start = await balance(wallet.id);
    const payment = payFromMiner(await coinbaseOutput(btcd, 4), wallet.primary, 30_000_000n);
    await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    const output = { txid: payment.id, vout: 0, amount: 30_000_000n };
    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await balance(wallet.id)).balance === start.balance + output.amount ? true : undefined), 'the deposit credited');
    const lostChange = output.amount - 10_000_000n - OUTSIDE_FEE;
    const lost = await spendOutside(
      output,
      [
        [outsideP2wpkh(), 10_000_000n],
        [wallet.primary, lostChange],
      ],
      { replaceable: true },
    );
    const [carrying] = await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await balance(wallet.id)).balance === start.balance + lostChange ? true : undefined), 'the spend debited, its change confirmed');
    const em = (await testOrm()).em.fork();
    const [change] = await em.find(IncomingTransfer, { txid: lost.id });

    // The blocks carrying it abandoned; on the new chain the key spends the same output elsewhere (paying more, it replaces the first in the mempool).
    await btcd.call('invalidateblock', [carrying]);
    const kept = await spendOutside(output, [[outsideP2wpkh(), output.amount - 50_000n]]);
    await btcd.generate(CONFIRMATIONS + 1);
    const [lostRow] = await outgoingRows(lost.id);
    await eventually(async () => ((await em.findOneOrFail(OutgoingTransfer, { id: lostRow!.id }, { refresh: true })).neverMined.lostAt ? true : undefined), 'the lost spend resolved');
    const returned = await em
      .getConnection()
      .execute<{ kind: string; balance: string }[]>(`select kind, balance::text from custody_journal_entries where reference_id = ? and kind = 'reorg_returned'`, [`${lostRow!.id}#1`]);
    assert.deepEqual(returned, [{ kind: 'reorg_returned', balance: output.amount.toString() }]);
    // The change it paid the wallet can never be mined either: written off (in its own transaction, just after).
    const reversedChange = await eventually(async () => {
      const read = await em.findOneOrFail(IncomingTransfer, { id: change!.id }, { refresh: true });
      return read.neverMined.lostAt ? read : undefined;
    }, 'the change written off');
    assert.equal(reversedChange.status, 'dropped');
    assert.equal((await balance(wallet.id)).balance, start.balance, 'the deposit, less what the spend that stayed took: the lost one returned, its change gone');
    assert.equal(await suspenseBalance(org.organizationId, 'BTC'), 0n, 'nothing left in suspense');
    assert.equal((await em.findOneOrFail(WalletOutput, { txid: output.txid, vout: 0 }, { refresh: true })).status, 'spent', 'spent, by the spend that stayed');
    const announced = await eventually(async () => {
      const events = receiver.attempts.map((attempt) => JSON.parse(attempt.body) as Delivered);
      const spend = events.find((event) => event.type === 'wallet.unexpected_spend_returned' && event.data.tx_hash === lost.id);
      const deposit = events.find((event) => event.type === 'deposit.reversal_final' && event.data.id === change!.id);
      return spend && deposit ? { spend, deposit } : undefined;
    }, 'the resolution announced');
    assert.deepEqual(announced.spend.data.returned, [{ asset: 'BTC', asset_id: 'BTC', amount: '0.3', amount_raw: output.amount.toString() }]);
    assert.equal((await outgoingRows(kept.id)).length, 1, 'the spend that stayed is debited as unexpected');
    await ledgerMatchesChain();
  });

  it('a settled send reorganised out, whose input the key spent elsewhere on the new chain: failed reorged_out once that is final, its change unmade, what it paid back; ledger = chain', async () => {
    const start = await balance(wallet.id);
    const input = await depositFromMiner(5, 30_000_000n);
    const send = await settledSend([{ txid: input.txid, vout: '0' }], '0.1');
    const em = (await testOrm()).em.fork();
    assert.equal((await em.find(WalletOutput, { createdBy: send.id })).length, 1, 'its change is the wallet\'s');
    const fee = BigInt(((await call('GET', `/v1/transactions/${send.id}`)).body as { fee_raw: string }).fee_raw);

    // Its blocks abandoned; on the new chain the key spends its input elsewhere (the send signals BIP-125: replaced in the mempool).
    await conflictOnNewChain(send.carrying, input, CONFIRMATIONS + 1);
    await mineUntil(async () => (await readSend(send.id)).status === 'failed', 'the send failed reorged_out');
    const failed = await readSend(send.id);
    assert.deepEqual([failed.failure_reason, failed.block_height], ['reorged_out', null]);
    const returned = await em
      .getConnection()
      .execute<{ balance: string }[]>(`select balance::text from custody_journal_entries where kind = 'reorg_returned' and reference_id = ?`, [`${send.id}#1`]);
    assert.deepEqual(returned, [{ balance: (10_000_000n + fee).toString() }], 'the amount and the fee, once');
    assert.equal((await balance(wallet.id)).balance, start.balance, 'the deposit, less the spend that stayed');
    assert.deepEqual(await em.find(WalletOutput, { createdBy: send.id }, { refresh: true }), [], 'its change never existed');
    assert.equal((await em.findOneOrFail(WalletOutput, { txid: input.txid, vout: 0 }, { refresh: true })).status, 'spent', 'spent by the conflict');
    assert.equal(await suspenseBalance(org.organizationId, 'BTC'), 0n, 'nothing left in suspense');
    await ledgerMatchesChain();
  });

  it('a settled send reorganised out whose change a later settled send spent: both failed reorged_out together once the conflict is final, both changes unmade; ledger = chain', async () => {
    const start = await balance(wallet.id);
    const input = await depositFromMiner(6, 30_000_000n);
    const first = await settledSend([{ txid: input.txid, vout: '0' }], '0.1');
    const em = (await testOrm()).em.fork();
    const [change] = await em.find(WalletOutput, { createdBy: first.id });
    assert.equal(change!.status, 'available', 'the first send settled: its change is spendable');
    const second = await settledSend([{ txid: change!.txid, vout: String(change!.vout) }], '0.05');
    assert.equal((await em.findOneOrFail(WalletOutput, { id: change!.id }, { refresh: true })).status, 'spent', 'the second send spent the change');

    // Both sends' blocks abandoned; on the new chain the key spends the first send's input elsewhere: neither can ever be mined.
    // Longer than the branch abandoned (both sends' blocks): the scanner follows the new chain once it is past its cursor.
    await conflictOnNewChain(first.carrying, input, 2 * CONFIRMATIONS + 1);
    await mineUntil(async () => (await readSend(first.id)).status === 'failed' && (await readSend(second.id)).status === 'failed', 'both sends failed reorged_out');
    for (const id of [first.id, second.id]) assert.deepEqual([(await readSend(id)).failure_reason, (await readSend(id)).block_height], ['reorged_out', null]);
    const returned = await em
      .getConnection()
      .execute<{ reference_id: string; created_at: string }[]>(`select reference_id, created_at::text from custody_journal_entries where kind = 'reorg_returned' and (reference_id like ? or reference_id like ?)`, [`${first.id}#%`, `${second.id}#%`]);
    assert.equal(returned.length, 2, 'each returned once');
    assert.equal(returned[0]!.created_at, returned[1]!.created_at, 'in one transaction: no moment where the ledger holds one and not the other');
    assert.equal((await balance(wallet.id)).balance, start.balance, 'the deposit, less the spend that stayed');
    assert.deepEqual(await em.find(WalletOutput, { createdBy: { $in: [first.id, second.id] } }, { refresh: true }), [], 'neither change ever existed');
    assert.equal((await em.findOneOrFail(WalletOutput, { txid: input.txid, vout: 0 }, { refresh: true })).status, 'spent', 'spent by the conflict');
    assert.equal(await suspenseBalance(org.organizationId, 'BTC'), 0n, 'nothing left in suspense');
    await ledgerMatchesChain();
  });

  it('a settled send reorganised out whose change a send under way holds: that send fails on the proof (its input will never exist), then the settled one is failed reorged_out; ledger = chain', async () => {
    const start = await balance(wallet.id);
    const input = await depositFromMiner(7, 30_000_000n);
    const first = await settledSend([{ txid: input.txid, vout: '0' }], '0.1');
    const em = (await testOrm()).em.fork();
    const [change] = await em.find(WalletOutput, { createdBy: first.id });
    const second = await broadcastSend([{ txid: change!.txid, vout: String(change!.vout) }], '0.05');

    // Before the second is mined, the first's blocks are abandoned and the key spends its input elsewhere on the new chain.
    await conflictOnNewChain(first.carrying, input, CONFIRMATIONS + 1);
    await mineUntil(async () => (await readSend(first.id)).status === 'failed', 'the settled send failed reorged_out');
    assert.deepEqual([(await readSend(second)).status, (await readSend(second)).failure_reason], ['failed', 'inputs_spent'], 'the send under way failed first, on the proof');
    assert.equal((await readSend(first.id)).failure_reason, 'reorged_out');
    assert.deepEqual(await balance(wallet.id), { ...start, balance: start.balance }, 'the deposit, less the spend that stayed; nothing locked');
    assert.deepEqual(await em.find(WalletOutput, { createdBy: { $in: [first.id, second] } }, { refresh: true }), [], 'neither change ever existed');
    assert.equal(await suspenseBalance(org.organizationId, 'BTC'), 0n, 'nothing left in suspense');
    await ledgerMatchesChain();
  });
});
