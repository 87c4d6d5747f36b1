import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { secp256k1 } from '@noble/curves/secp256k1';
import { hex } from '@scure/base';
import * as btc from '@scure/btc-signer';
import { ChainNodes } from '../../src/chains/nodes';
import { OutgoingTransfer } from '../../src/monitoring/entities';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { type TestApp, type TestOrganization } from '../support/app';
import { COINBASE_MATURITY, coinbaseOutput, payFromMiner, startBtcdOrSkip, type Btcd, btcdHeight, btcdSandboxConfig } from '../support/btcd';
import { testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';
import { startScannedService, type ScannedService } from '../support/scanned-service';
import type { Schema } from '../support/typed-api';

const CONFIRMATIONS = 2;

type Transaction = Schema<'Transaction'>;

const outsideP2wpkh = () => btc.p2wpkh(secp256k1.getPublicKey(randomBytes(32), true), btc.TEST_NETWORK).address!;

/**
 * The orphan race of a replaced Bitcoin send, on two real nodes (btcd, regtest): the service's node mines
 * the speed-up while another node mines the original, whose chain then wins. However the race goes (the
 * speed-up only seen mined, or already settled on), the send settles on the original under the same
 * send: the recipient paid once, nothing failed on a false proof, no spend of the platform's own taken
 * for an unexpected one, the original's change spendable, ledger = chain.
 */
describe('A replaced Bitcoin send whose original wins an orphan race (two btcd nodes, regtest)', function () {
  let service: Btcd;
  let rival: Btcd;
  let app: TestApp;
  let org: TestOrganization;
  let scanned: ScannedService;
  let config: Record<string, string>;
  let wallet: { id: string; primary: string };
  let nextCoinbase = 1;

  before(async function () {
    // The service's node leaves a 1 sat/vB send waiting (see btcd-fee-bumping.test.ts); the rival mines it.
    service = await startBtcdOrSkip(this, ['--minrelaytxfee=0.00002', '--norelaypriority', '--blockprioritysize=0']);
    rival = await startBtcdOrSkip(this, ['--minrelaytxfee=0.000001']);
    await service.generate(COINBASE_MATURITY + 10);
    await copyBlocks(service, rival);
    config = { ...btcdSandboxConfig(service, `btcd-candidate-races-${randomUUID()}`, CONFIRMATIONS), FEE_BUMP_AFTER_BLOCKS: '0' };
    scanned = await startScannedService('bitcoin', 'btcd candidate races', config, () => btcdHeight(service));
    ({ app, org } = scanned);
    const vault = await call('POST', '/v1/vaults', { name: 'BTC' });
    const created = await call('POST', '/v1/wallets', { name: 'BTC', chain: 'bitcoin', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    wallet = { id: created.body.id, primary: created.body.primary_address.address };
  });
  after(async () => {
    await scanned?.stop();
    await service?.stop();
    await rival?.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const read = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as Transaction;
  const balance = async () => {
    const row = (await call('GET', `/v1/wallets/${wallet.id}/balances`)).body.data[0] as { balance: string; locked: string };
    return { balance: BigInt(row.balance), locked: BigInt(row.locked) };
  };
  const mempool = async (node: Btcd) => (await node.call('getrawmempool')) as string[];

  /** Gives `to` the blocks of `from` from the newest one both hold, as a peer would relay them; `to` takes the longer chain. */
  async function copyBlocks(from: Btcd, to: Btcd): Promise<void> {
    const held = async (hash: string) => to.call('getblockheader', [hash, true]).then(
      () => true,
      () => false,
    );
    const missing: string[] = [];
    for (let hash = (await from.call('getbestblockhash')) as string; !(await held(hash)); ) {
      missing.unshift(hash);
      hash = ((await from.call('getblockheader', [hash, true])) as { previousblockhash: string }).previousblockhash;
    }
    for (const hash of missing) {
      const answer = await to.call('submitblock', [(await from.call('getblock', [hash, 0])) as string]);
      assert.equal(answer, null, `block ${hash} taken`);
    }
  }
  async function funded(amount: bigint): Promise<void> {
    const before = (await balance()).balance;
    const payment = payFromMiner(await coinbaseOutput(service, nextCoinbase++), wallet.primary, amount);
    await service.call('sendrawtransaction', [hex.encode(payment.extract())]);
    await service.generate(CONFIRMATIONS);
    await copyBlocks(service, rival);
    await eventually(async () => ((await balance()).balance === before + amount ? true : undefined), 'the deposit credited');
  }
  /**
   * A send at 1 sat/vB waiting in the service's node, also held by the rival; sped up, the speed-up replacing
   * it in the service's node only (the nodes are not peers); then the service's node mines the speed-up.
   */
  async function speedUpMinedByService(amount: string): Promise<{ original: Transaction; speedUp: string }> {
    const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outsideP2wpkh(), amount, asset: 'BTC', fee_rate: '1' });
    assert.equal(created.status, 201, created.text);
    const original = await eventually(async () => {
      const transaction = await read(created.body.id);
      return transaction.status === 'broadcast' && (await mempool(service)).includes(transaction.tx_hash!) ? transaction : undefined;
    }, 'the send in the mempool');
    await rival.call('sendrawtransaction', [await service.call('getrawtransaction', [original.tx_hash, 0])]);
    const asked = await call('POST', `/v1/transactions/${original.id}/speed-up`, { fee_rate: '5' });
    assert.equal(asked.status, 200, asked.text);
    const speedUp = await eventually(async () => {
      const [replacement] = (await read(original.id)).replacements;
      return replacement?.status === 'broadcast' && (await mempool(service)).includes(replacement.tx_hash!) ? replacement.tx_hash! : undefined;
    }, 'the speed-up in the mempool');
    await service.generate(1);
    return { original, speedUp };
  }
  /** The rival mines `blocks` blocks (the original among them) and the service's node takes its longer chain. */
  async function rivalChainWins(blocks: number, original: string): Promise<void> {
    const hashes = await rival.generate(blocks);
    const first = (await rival.call('getblock', [hashes[0], 1])) as { tx: string[] };
    assert.ok(first.tx.includes(original), 'the rival mined the original');
    await copyBlocks(rival, service);
    assert.equal(((await service.call('getbestblockhash')) as string), hashes.at(-1), "the service's node reorganised onto the rival's chain");
  }
  async function settled(id: string): Promise<Transaction> {
    return eventually(async () => {
      const transaction = await read(id);
      return ['confirmed', 'failed'].includes(transaction.status) && transaction.confirmations > 0 ? transaction : undefined;
    }, 'the send settled in its block', 60_000, 500);
  }
  async function outputsOf(transactionId: string) {
    return (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ txid: string; status: string }[]>(`select txid, status from wallet_outputs where created_by_id = ? order by txid`, [transactionId]);
  }
  async function debits(transactionId: string): Promise<bigint> {
    const rows = await (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ balance: string }[]>(`select balance::text as balance from custody_journal_entries where reference_type = 'transaction' and reference_id like ? and kind in ('send_debit', 'fee_debit')`, [`${transactionId}%`]);
    return rows.reduce((sum, row) => sum + BigInt(row.balance), 0n);
  }
  async function failureEvents(transactionId: string): Promise<number> {
    const [row] = await (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ count: string }[]>(
        `select count(*)::text as count from events where organization_id = ? and (type = 'wallet.unexpected_spend' or (type = 'transaction.failed' and data->>'id' = ?))`,
        [org.organizationId, transactionId],
      );
    return Number(row!.count);
  }
  /** Scanning caught up; the ledger agrees with the node; every spend the scanner saw is a send's, none unexpected. */
  async function ledgerMatchesChain(): Promise<void> {
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const provider = await nodes.provider('bitcoin', 'sandbox');
    await eventually(async () => {
      const result = await compareLedgerWithChain((await testOrm()).em.fork(), provider, { chain: 'bitcoin', environment: 'sandbox', organizationId: org.organizationId });
      return result.mismatches.length === 0 ? true : undefined;
    }, 'ledger = chain');
    const outgoing = await (await testOrm()).em.fork().find(OutgoingTransfer, { organization: org.organizationId });
    assert.deepEqual(outgoing.filter((transfer) => transfer.unexpected || transfer.transactionId == null), [], "every spend the platform's");
  }
  /** The send settled on its original: paid once at the original's fee, locks released, the original's change the spendable one. */
  async function settledOnOriginal(original: Transaction, speedUp: string, before: { balance: bigint }) {
    const done = await settled(original.id);
    assert.deepEqual([done.status, done.failure_reason, done.failed_at], ['confirmed', null, null], 'never failed');
    assert.equal(done.tx_hash, original.tx_hash, 'the mined candidate is the original');
    assert.equal(done.replacements[0]!.status, 'superseded');
    assert.equal(done.fee_raw, original.fee_limit_raw);
    assert.equal(done.recipient_amount_raw, original.recipient_amount_raw);
    const fee = BigInt(original.fee_limit_raw);
    assert.equal(await debits(original.id), -(BigInt(original.recipient_amount_raw) + fee), 'the amount and the fee debited once');
    assert.deepEqual(await balance(), { balance: before.balance - BigInt(original.recipient_amount_raw) - fee, locked: 0n });
    assert.deepEqual(
      (await outputsOf(original.id)).map((row) => [row.txid, row.status]).sort(),
      [
        [original.tx_hash, 'available'],
        [speedUp, 'unconfirmed'],
      ].sort(),
      "the original's change spendable; the speed-up's never",
    );
    assert.equal(await failureEvents(original.id), 0, 'no transaction.failed, no wallet.unexpected_spend');
    await ledgerMatchesChain();
  }

  it('settles on the original when the speed-up it saw mined is orphaned by the rival chain before the confirmation count', async () => {
    await funded(10_000_000n);
    const before = await balance();
    const { original, speedUp } = await speedUpMinedByService('0.01');
    await eventually(async () => {
      const transaction = await read(original.id);
      return transaction.status === 'confirming' && transaction.tx_hash === speedUp ? true : undefined;
    }, 'the send confirming as the speed-up');
    await rivalChainWins(CONFIRMATIONS, original.tx_hash!);
    await settledOnOriginal(original, speedUp, before);
  });

  it('re-settles a send already settled on the speed-up when a deeper rival chain mines the original instead', async () => {
    const before = await balance();
    const { original, speedUp } = await speedUpMinedByService('0.02');
    await service.generate(CONFIRMATIONS - 1);
    const first = await settled(original.id);
    assert.deepEqual([first.status, first.tx_hash], ['confirmed', speedUp], 'settled on the speed-up first');
    await rivalChainWins(CONFIRMATIONS + 1, original.tx_hash!);
    await eventually(async () => ((await read(original.id)).tx_hash === original.tx_hash ? true : undefined), 'the send moved onto the original');
    await settledOnOriginal(original, speedUp, before);
  });
});
