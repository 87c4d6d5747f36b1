import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { hex } from '@scure/base';
import { IncomingTransfer } from '../../src/monitoring/entities';
import { chainScanWorkflowId, scanThroughUpdate } from '../../src/monitoring/flows/chain-scan';
import { COINBASE_MATURITY, coinbaseOutput, payFromMiner, startBtcdOrSkip, type Btcd, btcdHeight, btcdSandboxConfig } from '../support/btcd';
import { type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 2;

describe('Deposits from a real Bitcoin node (btcd, regtest)', function () {
  let btcd: Btcd;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;

  before(async function () {
    btcd = await startBtcdOrSkip(this);
    await btcd.generate(COINBASE_MATURITY + 1);
    const taskQueue = `btcd-deposits-${randomUUID()}`;
    const config = btcdSandboxConfig(btcd, taskQueue, CONFIRMATIONS);
    service = await startScannedService('bitcoin', 'btcd deposits', config, () => btcdHeight(btcd));
    ({ app, org } = service);
  });
  after(async () => {
    if (!btcd) return;
    await service?.stop();
    await btcd.stop();
  });

  it('sees a payment to a p2wpkh address of ours in its block as pending, and credits it at the confirmation count', async () => {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'BTC' } });
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'BTC', chain: 'bitcoin', vault_id: vault.body.id, wallet_type: 'hot' } });
    const address = wallet.body.primary_address;
    assert.equal(address.format, 'p2wpkh');
    assert.match(address.address, /^tb1q/);
    const handle = (await localTemporal()).client.workflow.getHandle(chainScanWorkflowId('bitcoin', 'sandbox'));
    const scanned = async () => (await handle.executeUpdate(scanThroughUpdate, { args: [{ height: Number(await btcd.call('getblockcount')), waitSeconds: 30 }] })).reached;

    const payment = payFromMiner(await coinbaseOutput(btcd, 1), address.address, 123_456_789n);
    await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    await btcd.generate(1);
    assert.ok(await scanned());
    const pending = await app.request('GET', `/v1/deposits?wallet_id=${wallet.body.id}`, { key: org.secret });
    assert.equal(pending.body.data.length, 1);
    assert.deepEqual(
      { status: pending.body.data[0].status, tx: pending.body.data[0].tx_hash, position: pending.body.data[0].position, amount: pending.body.data[0].amount, confirmations: pending.body.data[0].confirmations },
      { status: 'pending', tx: payment.id, position: 'out:0', amount: '1.23456789', confirmations: 1 },
    );
    const balance = async () => (await app.request('GET', `/v1/wallets/${wallet.body.id}/balances`, { key: org.secret })).body.data[0] as { balance: string; pending: string };
    const seen = await balance();
    assert.equal(seen.balance, '0', 'not yet available');
    assert.equal(seen.pending, '123456789');

    await btcd.generate(CONFIRMATIONS - 1);
    await eventually(async () => ((await balance()).balance === '123456789' ? true : undefined), 'deposit credited');
    assert.equal((await balance()).pending, '0');
    const confirmed = await app.request('GET', `/v1/deposits/${pending.body.data[0].id as string}`, { key: org.secret });
    assert.equal(confirmed.body.status, 'confirmed');
  });

  it('reverses a confirmed deposit when its blocks are invalidated, and credits it again as its own round when the new chain mines it', async () => {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'BTC reorg' } });
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'BTC reorg', chain: 'bitcoin', vault_id: vault.body.id, wallet_type: 'hot' } });
    const balance = async () => (await app.request('GET', `/v1/wallets/${wallet.body.id}/balances`, { key: org.secret })).body.data[0] as { balance: string; pending: string };
    const payment = payFromMiner(await coinbaseOutput(btcd, 2), wallet.body.primary_address.address, 50_000_000n);
    await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    const [carrying] = await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await balance()).balance === '50000000' ? true : undefined), 'deposit credited');
    const [deposit] = (await app.request('GET', `/v1/deposits?wallet_id=${wallet.body.id}`, { key: org.secret })).body.data as { id: string }[];

    // Its block and the confirmation on top are invalidated; a longer chain grows from the block before.
    await btcd.call('invalidateblock', [carrying]);
    if (!((await btcd.call('getrawmempool')) as string[]).includes(payment.id)) await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    await btcd.generate(CONFIRMATIONS + 1);
    const journal = async () =>
      (await testOrm()).em
        .fork()
        .getConnection()
        .execute<{ kind: string; reference_id: string }[]>(`select kind, reference_id from custody_journal_entries where reference_id like ? order by created_at, kind`, [`${deposit!.id}#%`]);
    await eventually(async () => ((await journal()).length === 5 ? true : undefined), 'reversed, then seen and confirmed again');
    assert.deepEqual(
      (await journal()).map((entry) => `${entry.kind} ${entry.reference_id.slice(deposit!.id.length)}`),
      ['deposit_seen #0', 'deposit_confirmed #0', 'deposit_reversed #0', 'deposit_seen #1', 'deposit_confirmed #1'],
    );
    const credited = await balance();
    assert.deepEqual([credited.balance, credited.pending], ['50000000', '0'], 'credited once');
    const read = await app.request('GET', `/v1/deposits/${deposit!.id}`, { key: org.secret });
    assert.equal(read.body.status, 'confirmed');
    assert.notEqual(read.body.block_hash, carrying);
    const outputs = await (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ status: string }[]>(`select status from wallet_outputs where wallet_id = ?`, [wallet.body.id]);
    assert.deepEqual(outputs, [{ status: 'available' }], 'its output, once, spendable again');
  });

  it("a reversed deposit whose payer spent the same output elsewhere on the new chain: written off from suspense once that is final", async () => {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'BTC double-spent' } });
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'BTC double-spent', chain: 'bitcoin', vault_id: vault.body.id, wallet_type: 'hot' } });
    const balance = async () => (await app.request('GET', `/v1/wallets/${wallet.body.id}/balances`, { key: org.secret })).body.data[0] as { balance: string; pending: string };
    const coinbase = await coinbaseOutput(btcd, 3);
    const payment = payFromMiner(coinbase, wallet.body.primary_address.address, 40_000_000n, { replaceable: true });
    await btcd.call('sendrawtransaction', [hex.encode(payment.extract())]);
    const [carrying] = await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await balance()).balance === '40000000' ? true : undefined), 'deposit credited');
    const [deposit] = (await app.request('GET', `/v1/deposits?wallet_id=${wallet.body.id}`, { key: org.secret })).body.data as { id: string }[];

    // Its blocks abandoned; on the new chain the payer spends the same output elsewhere (paying more, it replaces the payment in the mempool).
    await btcd.call('invalidateblock', [carrying]);
    const elsewhere = payFromMiner(coinbase, 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', 40_000_000n, { fee: 100_000n });
    await btcd.call('sendrawtransaction', [hex.encode(elsewhere.extract())]);
    await btcd.generate(CONFIRMATIONS + 1);
    const em = (await testOrm()).em.fork();
    const row = () => em.findOneOrFail(IncomingTransfer, { id: deposit!.id }, { refresh: true });
    await eventually(async () => ((await row()).neverMined.lossSeenAtHeight != null ? true : undefined), 'the loss proven', 30_000);
    assert.equal((await row()).status, 'dropped');
    assert.equal((await row()).neverMined.lostAt, null, 'not resolved before the proof is final');
    assert.equal((await balance()).balance, '0', 'reversed: the credit waits in suspense');
    await btcd.generate(CONFIRMATIONS);
    await eventually(async () => ((await row()).neverMined.lostAt ? true : undefined), 'the reversal final', 30_000);
    const moves = await em
      .getConnection()
      .execute<{ kind: string; amount: string }[]>(
        `select p.kind, l.amount::text from ledger_postings p join ledger_lines l on l.posting_id = p.id where p.reference_id = ? and l.account_key like 'suspense:%' order by p.created_at`,
        [`${deposit!.id}#0`],
      );
    assert.deepEqual(
      moves.map((move) => [move.kind, move.amount]),
      [
        ['suspense_entered', '40000000'],
        ['suspense_written_off', '-40000000'],
      ],
    );
    assert.equal((await balance()).balance, '0');
  });
});
