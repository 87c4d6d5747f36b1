import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { CHAIN_IDS, type ChainId } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { ChainNodes } from '../../src/chains/nodes';
import { IncomingTransfer } from '../../src/monitoring/entities';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { startSandboxScanner, terminateWorkflows } from '../support/scanning';
import { testLogger } from '../support/secret-scan';
import { WebhookReceiver } from '../support/webhook-receiver';
import { RestartableWorker } from '../support/worker';

/** Small depths keep the test short; each chain's own count is what is checked. */
const CONFIRMATIONS: Record<ChainId, number> = { bitcoin: 2, ethereum: 3, tron: 2, solana: 4 };

describe('Deposits on the embedded devnet (sandbox helpers, block production, scanning, events)', () => {
  let app: TestApp;
  let org: TestOrganization;
  const receiver = new WebhookReceiver();
  const watcher = new WebhookReceiver();
  const taskQueue = `devnet-deposits-${randomUUID()}`;
  const config = {
    TEMPORAL_TASK_QUEUE: taskQueue,
    // Blocks come only when the test asks for them.
    DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
    CHAIN_SCAN_INTERVAL_SECONDS: '0.2',
    CHAIN_CONFIRMATIONS_BITCOIN: String(CONFIRMATIONS.bitcoin),
    CHAIN_CONFIRMATIONS_ETHEREUM: String(CONFIRMATIONS.ethereum),
    CHAIN_CONFIRMATIONS_TRON: String(CONFIRMATIONS.tron),
    CHAIN_CONFIRMATIONS_SOLANA: String(CONFIRMATIONS.solana),
  };

  const worker = new RestartableWorker(taskQueue, config);

  before(async () => {
    await Promise.all([receiver.start(), watcher.start()]);
    app = await startTestApp({ config });
    await worker.start();
    // Earlier files in this process may have mined devnet blocks no scanner read: each chain's scanner
    // catches up before the test, so the 10 s a mine waits for scanning covers only the blocks it mined.
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    for (const chain of CHAIN_IDS) {
      const provider = await nodes.provider(chain, 'sandbox');
      await startSandboxScanner((await localTemporal()).client, config, chain, async () => (await provider.tip()).height);
    }
    org = await createTestOrganization('Devnet deposits');
    const endpoint = await app.request('POST', '/v1/webhooks', { key: org.secret, body: { name: 'deposits', url: receiver.url } });
    receiver.secrets = [endpoint.body.signing_secret];
  });
  after(async () => {
    // The devnet's producers and scanners were started on this file's task queue: later files start their own.
    await terminateWorkflows((await localTemporal()).client, CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]));
    await worker.stop();
    await app?.close();
    await Promise.all([receiver.close(), watcher.close()]);
  });

  async function createWallet(chain: ChainId) {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: chain } });
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: chain, chain, vault_id: vault.body.id, wallet_type: 'hot' } });
    assert.equal(wallet.status, 201, wallet.text);
    return { id: wallet.body.id as string, address: wallet.body.primary_address.address as string };
  }
  const balances = async (walletId: string) =>
    Object.fromEntries(
      ((await app.request('GET', `/v1/wallets/${walletId}/balances`, { key: org.secret })).body.data as { asset_id: string; balance: string; pending: string }[]).map((row) => [
        row.asset_id,
        { balance: row.balance, pending: row.pending },
      ]),
    );
  const deposit = (body: Record<string, unknown>, key = org.secret) => app.request('POST', '/v1/sandbox/deposits', { key, body });
  const mine = async (chain: ChainId, count: number) => {
    const mined = await app.request('POST', `/v1/sandbox/chains/${chain}/blocks`, { key: org.secret, body: { count } });
    assert.equal(mined.status, 200, mined.text);
    assert.equal(mined.body.scanned, true, 'scanning processed the mined blocks before the answer');
    return mined.body as { height: number; hash: string };
  };

  const cases: { chain: ChainId; native: [string, string, string]; token?: [string, string, string] }[] = [
    { chain: 'bitcoin', native: ['BTC', '0.015', '1500000'] },
    { chain: 'ethereum', native: ['ETH', '1.25', '1250000000000000000'], token: ['USDC', '99.5', '99500000'] },
    { chain: 'tron', native: ['TRX', '12.5', '12500000'], token: ['USDT_TRX', '40', '40000000'] },
    { chain: 'solana', native: ['SOL', '0.5', '500000000'], token: ['USDC_SOL', '7.25', '7250000'] },
  ];
  for (const { chain, native, token } of cases) {
    it(`${chain}: a deposit is pending at once, available after ${CONFIRMATIONS[chain]} blocks, announced to the endpoint and the subscription`, async () => {
      const wallet = await createWallet(chain);
      const subscription = await app.request('POST', '/v1/subscriptions', { key: org.secret, body: { address: wallet.address, chain, webhook_url: watcher.url } });
      assert.equal(subscription.status, 201, subscription.text);
      const transfers = [native, ...(token ? [token] : [])];
      const sent: { asset_id: string; tx_hash: string; deposit: { id: string } }[] = [];
      for (const [asset, amount, raw] of transfers) {
        const response = await deposit({ chain, address: wallet.address, asset, amount });
        assert.equal(response.status, 201, response.text);
        assert.equal(response.body.amount_raw, raw);
        assert.equal(response.body.deposit.status, 'pending');
        assert.equal(response.body.deposit.block_height, null, 'in the mempool');
        sent.push(response.body);
      }
      const pending = await balances(wallet.id);
      for (const [index, [, , raw]] of transfers.entries()) assert.deepEqual(pending[sent[index]!.asset_id], { balance: '0', pending: raw });

      // The first block carries them (one confirmation), the last one of the depth confirms them.
      await mine(chain, 1);
      const mined = await app.request('GET', `/v1/deposits/${sent[0]!.deposit.id}`, { key: org.secret });
      assert.equal(mined.body.status, 'pending');
      assert.equal(mined.body.confirmations, 1);
      assert.notEqual(mined.body.block_hash, null);
      await mine(chain, CONFIRMATIONS[chain] - 1);
      const credited = await balances(wallet.id);
      for (const [index, [, , raw]] of transfers.entries()) assert.deepEqual(credited[sent[index]!.asset_id], { balance: raw, pending: '0' });

      const types = (target: WebhookReceiver) =>
        target.attempts
          .map((attempt) => JSON.parse(attempt.body) as { type: string; data: { to_address: string; status: string; asset_id: string } })
          .filter((event) => event.data.to_address === wallet.address)
          .map((event) => `${event.type}:${event.data.status}:${event.data.asset_id}`)
          .sort();
      const expected = transfers.flatMap((_, index) => {
        const assetId = sent[index]!.asset_id;
        const type = index === 0 ? 'incoming_native_tx' : 'incoming_token_tx';
        return [`${type}:pending:${assetId}`, `${type}:confirmed:${assetId}`];
      });
      const stablecoin = token ? [`deposit.success:confirmed:${sent[1]!.asset_id}`] : [];
      await eventually(async () => (types(receiver).length >= expected.length + stablecoin.length ? true : undefined), 'endpoint deliveries');
      assert.deepEqual(types(receiver), [...expected, ...stablecoin].sort());
      await eventually(async () => (types(watcher).length >= expected.length ? true : undefined), 'subscription deliveries');
      assert.deepEqual(types(watcher), [...expected].sort());
    });
  }

  it('credits each deposit once across a worker restart: block production and scanning resume where they stopped', async () => {
    const wallet = await createWallet('ethereum');
    assert.equal((await deposit({ chain: 'ethereum', address: wallet.address, asset: 'ETH', amount: '1' })).status, 201);
    await mine('ethereum', 1);
    await worker.stop();
    // No worker: the helper still records a deposit (the mempool and the ledger are PostgreSQL's).
    assert.equal((await deposit({ chain: 'ethereum', address: wallet.address, asset: 'ETH', amount: '2' })).status, 201);
    await worker.start();
    await mine('ethereum', CONFIRMATIONS.ethereum);
    assert.deepEqual((await balances(wallet.id)).ETH, { balance: '3000000000000000000', pending: '0' });
    const rows = await (await testOrm()).em.fork().find(IncomingTransfer, { wallet: wallet.id });
    assert.deepEqual(rows.map((row) => [row.amount, row.status]).sort(), [
      ['1000000000000000000', 'confirmed'],
      ['2000000000000000000', 'confirmed'],
    ]);
  });

  it('validates the helpers: sandbox keys only, assets of the chain, exact amounts, addresses of the network, 1 to 100 blocks', async () => {
    const wallet = await createWallet('bitcoin');
    const live = await org.key(['*'], 'live');
    assert.equal((await deposit({ chain: 'bitcoin', address: wallet.address, asset: 'BTC', amount: '1' }, live.secret)).status, 404);
    const refusals: [Record<string, unknown>, string][] = [
      [{ chain: 'bitcoin', address: wallet.address, asset: 'ETH', amount: '1' }, 'asset'],
      [{ chain: 'bitcoin', address: wallet.address, asset: 'BTC', amount: '0.000000001' }, 'amount'],
      [{ chain: 'bitcoin', address: wallet.address, asset: 'BTC', amount: '0' }, 'amount'],
      [{ chain: 'bitcoin', address: wallet.address, asset: 'BTC', amount: 1 }, 'amount'],
      [{ chain: 'bitcoin', address: 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4', asset: 'BTC', amount: '1' }, 'address'],
      [{ chain: 'dogecoin', address: wallet.address, asset: 'BTC', amount: '1' }, 'chain'],
    ];
    for (const [body, param] of refusals) {
      const refused = await deposit(body);
      assert.equal(refused.status, 400, `${JSON.stringify(body)}: ${refused.text}`);
      assert.equal(refused.body.error.param, param);
    }
    for (const count of [0, 101, 1.5]) {
      const refused = await app.request('POST', '/v1/sandbox/chains/bitcoin/blocks', { key: org.secret, body: { count } });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.param, 'count');
    }
    assert.equal((await app.request('POST', '/v1/sandbox/chains/dogecoin/blocks', { key: org.secret, body: { count: 1 } })).status, 404);
    assert.deepEqual((await balances(wallet.id)).BTC, { balance: '0', pending: '0' }, 'no refused request moved anything');

    // A chain served by a configured node is not the devnet's to fund.
    const withNode = await startTestApp({ config: { ...config, CHAIN_NODE_ETHEREUM_SANDBOX: 'http://127.0.0.1:9' } });
    try {
      const refused = await withNode.request('POST', '/v1/sandbox/deposits', { key: org.secret, body: { chain: 'ethereum', address: `0x${'11'.repeat(20)}`, asset: 'ETH', amount: '1' } });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.code, 'devnet_only');
    } finally {
      await withNode.close();
    }
  });

  it("keeps the ledger invariant on every chain: each wallet's ledger equals what the devnet says its addresses hold", async () => {
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    for (const chain of CHAIN_IDS) {
      const result = await compareLedgerWithChain((await testOrm()).em.fork(), await nodes.provider(chain, 'sandbox'), { chain, environment: 'sandbox', organizationId: org.organizationId });
      assert.ok(result.wallets > 0, chain);
      assert.deepEqual(result.mismatches, [], chain);
    }
  });
});
