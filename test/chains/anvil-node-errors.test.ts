import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { parseEther, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ChainNodes } from '../../src/chains/nodes';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { anvilFunder, anvilHeight, anvilMine, anvilReceipt, anvilSandboxConfig, deployAnvilToken, receiptFee, startAnvil, type Anvil } from '../support/anvil';
import { type TestApp, type TestOrganization } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { startNodeGateway, type NodeGateway } from '../support/node-gateway';
import { testLogger } from '../support/secret-scan';
import { startScannedService, type ScannedService } from '../support/scanned-service';
import type { Schema } from '../support/typed-api';

const CONFIRMATIONS = 2;

type Transaction = Schema<'Transaction'>;

/**
 * Proof, not guesses (issue 48 part 5), on a real Ethereum node (anvil) behind a gateway, as a provider's
 * load balancer is: an error that refuses nothing definite (an unknown code, a gateway's status) never
 * fails a send; a send a node refused while another took its bytes fails, and once mined after all is
 * debited what the chain shows and raises transaction.mined_after_failure.
 */
describe('Node errors on a real Ethereum node behind a gateway (anvil): unavailable is no refusal; a failed send mined after all is debited, loudly', () => {
  let anvil: Anvil;
  let gateway: NodeGateway;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  const config: Record<string, string> = {};
  const outside = privateKeyToAccount(generatePrivateKey()).address;
  let wallet: { id: string; address: Hex };

  before(async () => {
    anvil = await startAnvil();
    gateway = await startNodeGateway(anvil.url);
    const token = await deployAnvilToken(anvil);
    Object.assign(config, anvilSandboxConfig(anvil, `anvil-node-errors-${randomUUID()}`, token, CONFIRMATIONS), { CHAIN_NODE_ETHEREUM_SANDBOX: gateway.url, FEE_BUMP_AFTER_BLOCKS: '0' });
    service = await startScannedService('ethereum', 'Anvil node errors', config, () => anvilHeight(anvil));
    ({ app, org } = service);
    const vault = await call('POST', '/v1/vaults', { name: 'ETH' });
    const created = await call('POST', '/v1/wallets', { name: 'ETH', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    wallet = { id: created.body.id, address: created.body.primary_address.address };
    await anvilFunder(anvil).sendTransaction({ to: wallet.address, value: parseEther('1') });
    await anvilMine(anvil, CONFIRMATIONS);
    await eventually(async () => ((await eth()).balance === parseEther('1') ? true : undefined), 'the wallet funded');
  });
  after(async () => {
    await service?.stop();
    await gateway?.close();
    await anvil?.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const read = async (id: string) => (await call('GET', `/v1/transactions/${id}`)).body as Transaction;
  async function eth() {
    const rows = (await call('GET', `/v1/wallets/${wallet.id}/balances`)).body.data as { asset_id: string; balance: string; locked: string }[];
    const row = rows.find((candidate) => candidate.asset_id === 'ETH')!;
    return { balance: BigInt(row.balance), locked: BigInt(row.locked) };
  }
  async function eventsOf(type: string, transactionId: string) {
    return (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ data: Record<string, unknown> }[]>(`select data from events where organization_id = ? and type = ? and data->>'id' = ?`, [org.organizationId, type, transactionId]);
  }
  async function ledgerMatchesChain() {
    const provider = await new ChainNodes(testConfig(config), testLogger('test'), await testOrm()).provider('ethereum', 'sandbox');
    await eventually(async () => {
      const result = await compareLedgerWithChain((await testOrm()).em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId, assetIds: ['ETH'] });
      return result.mismatches.length === 0 ? true : undefined;
    }, 'ledger = chain');
  }

  it('an unknown JSON-RPC error and a gateway status at the first handing release nothing: the same bytes are broadcast again, mined and settled once', async () => {
    const before = await eth();
    // Neither answer is the node's verdict, and the bytes never reach it: before issue 48 the first failed the send at once.
    gateway.answerNextBroadcast({ status: 200, error: { code: -32603, message: 'upstream request timed out' }, forward: false });
    gateway.answerNextBroadcast({ status: 502, error: { code: -32000, message: 'insufficient funds for gas * price + value' }, forward: false });
    const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outside, amount: '0.1', asset: 'ETH' });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    await eventually(async () => (gateway.answered.length >= 2 ? true : undefined), 'both answered by the gateway');
    const mined = await eventually(async () => {
      const transaction = await read(id);
      assert.equal(transaction.failed_at, null, 'never failed');
      return transaction.tx_hash && (await anvil.call('eth_getTransactionReceipt', [transaction.tx_hash])) ? transaction : undefined;
    }, 'the bytes mined at a later broadcast');
    await anvilMine(anvil, CONFIRMATIONS);
    const done = await eventually(async () => ((await read(id)).status === 'confirmed' ? read(id) : undefined), 'the send settled');
    assert.deepEqual([done.failure_reason, done.failed_at, done.mined_after_failure_at], [null, null, null]);
    assert.deepEqual(await eventsOf('transaction.failed', id), [], 'no transaction.failed');
    const fee = receiptFee(await anvilReceipt(anvil, mined.tx_hash!));
    assert.deepEqual(await eth(), { balance: before.balance - parseEther('0.1') - fee, locked: 0n }, 'debited once, the lock released once');
    await ledgerMatchesChain();
  });

  it('a send refused by one node while another took its bytes fails; mined after all it is debited what the chain shows, confirmed, and raises transaction.mined_after_failure', async () => {
    const before = await eth();
    await anvil.call('evm_setAutomine', [false]);
    try {
      // A definite refusal, and lookups answered by the refusing node: no proof the bytes are anywhere, so the send fails and its lock is released.
      gateway.answerNextBroadcast({ status: 200, error: { code: -32000, message: 'nonce too low' }, forward: true, hide: true });
      const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outside, amount: '0.2', asset: 'ETH' });
      assert.equal(created.status, 201, created.text);
      const id = created.body.id as string;
      const failed = await eventually(async () => ((await read(id)).status === 'failed' ? read(id) : undefined), 'the send failed');
      assert.equal(failed.failure_reason, 'nonce_too_low');
      assert.deepEqual(await eth(), before, 'its lock released, nothing debited');

      gateway.hidden.clear();
      await anvilMine(anvil, 1);
      const fee = receiptFee(await anvilReceipt(anvil, failed.tx_hash!));
      const late = await eventually(async () => ((await read(id)).mined_after_failure_at ? read(id) : undefined), 'the late mining seen');
      assert.deepEqual([late.status, late.tx_hash, late.failure_reason], ['confirmed', failed.tx_hash, null]);
      assert.equal(late.failed_at, failed.failed_at, 'when it was failed is kept');
      assert.deepEqual(await eth(), { balance: before.balance - parseEther('0.2') - fee, locked: 0n }, "the send's amount and fee debited, once");
      const [alarm] = await eventsOf('transaction.mined_after_failure', id);
      assert.ok(alarm, 'transaction.mined_after_failure raised');
      assert.deepEqual(alarm.data.failure && (alarm.data.failure as { reason: string }).reason, 'nonce_too_low');
      assert.deepEqual((alarm.data.debits as { asset_id: string; amount_raw: string }[]).map((debit) => [debit.asset_id, debit.amount_raw]), [['ETH', (parseEther('0.2') + fee).toString()]]);
      const unexpected = await (await testOrm()).em.fork().getConnection().execute(`select 1 from events where organization_id = ? and type = 'wallet.unexpected_spend'`, [org.organizationId]);
      assert.deepEqual(unexpected, [], 'not announced as a spend the platform did not make');
      const metrics = await app.request('GET', '/metrics');
      assert.match(metrics.text, /transactions_mined_after_failure\{chain="ethereum",environment="sandbox"\} 1/);
    } finally {
      await anvil.call('evm_setAutomine', [true]);
    }
    await anvilMine(anvil, CONFIRMATIONS);
    await ledgerMatchesChain();
  });
});
