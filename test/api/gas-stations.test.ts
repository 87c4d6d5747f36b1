import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { CHAIN_IDS } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal } from '../support/environment';
import { setRequiredApprovals } from '../support/isolation-fixtures';
import { eventually } from '../support/eventually';
import { terminateWorkflows } from '../support/scanning';
import { createTestWorker } from '../support/worker';

interface Station {
  id: string;
  object: string;
  name: string;
  chain: string;
  network: string;
  address: string;
  wallet_id: string;
  asset: string;
  asset_decimals: number;
  balance: string;
  balance_source: string;
  auto_refill_enabled: boolean;
  gas_strategy: string;
  max_gas_price: string;
  daily_sponsorship_budget: string;
  daily_sponsorship_budget_raw: string;
  threshold: string;
  threshold_raw: string;
  refill_amount: string | null;
  refill_amount_raw: string | null;
  refill_from_wallet_id: string | null;
  health_status: string;
  status: string;
  created_at: string;
  updated_at: string;
}

/** Gas stations through the real API, Temporal and PostgreSQL; refills on the Ethereum devnet. */
describe('Gas stations: the resource and manual refills', () => {
  let app: TestApp;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  let other: TestOrganization;
  const taskQueue = `gas-stations-${randomUUID()}`;
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_SCAN_INTERVAL_SECONDS: '0.2', CHAIN_CONFIRMATIONS_ETHEREUM: '2' };

  before(async () => {
    app = await startTestApp({ config });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Gas stations');
    // Raising a station's limits is a governance change (test/api/governance.test.ts): with no approvals required it applies at once.
    await setRequiredApprovals(org.organizationId, 0);
    other = await createTestOrganization('Gas stations, other');
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]));
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });
  async function createWallet(chain: string, owner = org) {
    const vault = await call('POST', '/v1/vaults', { name: `Funding ${chain}` }, owner.secret);
    const wallet = await call('POST', '/v1/wallets', { name: `Funding ${chain}`, chain, vault_id: vault.body.id, wallet_type: 'hot' }, owner.secret);
    assert.equal(wallet.status, 201, wallet.text);
    return { id: wallet.body.id as string, address: wallet.body.primary_address.address as string };
  }
  const mine = async (count: number) => assert.equal((await call('POST', '/v1/sandbox/chains/ethereum/blocks', { count })).status, 200);

  let ethereum: Station;
  let funding: { id: string; address: string };

  it('creates a station with every field filled: its own operational wallet in the "Gas stations" vault, its balance read from the chain', async () => {
    funding = await createWallet('ethereum');
    const created = await call('POST', '/v1/gas-stations', {
      name: 'ETH gas',
      chain: 'ethereum',
      threshold: '0.05',
      gas_strategy: 'fast',
      max_gas_price: '80',
      refill_amount: '0.1',
      refill_from_wallet_id: funding.id,
      network: 'mainnet',
    });
    assert.equal(created.status, 201, created.text);
    ethereum = created.body as Station;
    assert.equal(ethereum.object, 'gas_station');
    assert.equal(ethereum.chain, 'ethereum');
    assert.equal(ethereum.network, 'sepolia', 'the key decides the network; the deprecated field is ignored');
    assert.equal(ethereum.asset, 'ETH');
    assert.equal(ethereum.asset_decimals, 18);
    assert.equal(ethereum.balance, '0');
    assert.equal(ethereum.balance_source, 'ledger', 'a new address: its ledger, no node asked inside the creating transaction');
    assert.equal((await call('GET', `/v1/gas-stations/${ethereum.id}`)).body.balance_source, 'chain');
    assert.equal(ethereum.threshold, '0.05');
    assert.equal(ethereum.threshold_raw, '50000000000000000');
    assert.equal(ethereum.refill_amount, '0.1');
    assert.equal(ethereum.refill_amount_raw, '100000000000000000');
    assert.equal(ethereum.refill_from_wallet_id, funding.id);
    assert.equal(ethereum.auto_refill_enabled, false);
    assert.equal(ethereum.gas_strategy, 'fast');
    assert.equal(ethereum.max_gas_price, '80');
    assert.equal(ethereum.health_status, 'low');
    assert.equal(ethereum.status, 'active');

    const wallet = await call('GET', `/v1/wallets/${ethereum.wallet_id}`);
    assert.equal(wallet.body.wallet_type, 'operational');
    assert.equal(wallet.body.primary_address.address, ethereum.address, "the station's address is its wallet's, derived from the organization's keys");
    const vault = await call('GET', `/v1/vaults/${wallet.body.vault_id}`);
    assert.equal(vault.body.name, 'Gas stations');

    const tron = await call('POST', '/v1/gas-stations', { name: 'TRX gas', chain: 'tron', threshold: '0' });
    assert.equal(tron.status, 201, tron.text);
    assert.equal(tron.body.health_status, 'healthy', 'a zero balance is at a zero threshold');
    assert.equal(tron.body.gas_strategy, 'standard');
    assert.equal(tron.body.refill_amount, null);
    // Named none: the deployment's defaults for Tron apply (GAS_STATION_DEFAULT_*: 50,000,000 sun a fee, 1,000 TRX a day); no station is unlimited.
    assert.equal(tron.body.max_gas_price, '50000000');
    assert.equal(tron.body.daily_sponsorship_budget, '1000');
    assert.equal(tron.body.daily_sponsorship_budget_raw, '1000000000');
    assert.equal(ethereum.daily_sponsorship_budget, '0.5', "the Ethereum station set its max_gas_price, and has the default budget");
    const tronRead = (await call('GET', `/v1/gas-stations/${tron.body.id}`)).body;
    assert.deepEqual([tronRead.max_gas_price, tronRead.daily_sponsorship_budget_raw], ['50000000', '1000000000'], 'GET shows the defaults too');
    const tronWallet = await call('GET', `/v1/wallets/${tron.body.wallet_id}`);
    assert.equal(tronWallet.body.vault_id, wallet.body.vault_id, 'one "Gas stations" vault per environment');

    const again = await call('POST', '/v1/gas-stations', { name: 'Second ETH', chain: 'ethereum', threshold: '1' });
    assert.equal(again.status, 409, again.text);
    assert.equal(again.body.error.code, 'gas_station_exists');
    assert.equal(again.body.error.details.gas_station_id, ethereum.id);
  });

  it('refuses invalid stations with the offending field, and a wallet of another organization as missing', async () => {
    const solanaWallet = await createWallet('solana');
    const cases: { body: Record<string, unknown>; status: number; param: string; code?: string }[] = [
      { body: { name: 'x', chain: 'bitcoin', threshold: '1.123456789' }, status: 400, param: 'threshold' },
      { body: { name: 'x', chain: 'bitcoin', threshold: '-1' }, status: 400, param: 'threshold' },
      { body: { name: 'x', chain: 'dogecoin', threshold: '1' }, status: 400, param: 'chain' },
      { body: { name: 'x', chain: 'bitcoin', threshold: '1', gas_strategy: 'turbo' }, status: 400, param: 'gas_strategy' },
      { body: { name: 'x', chain: 'bitcoin', threshold: '1', refill_amount: '0' }, status: 400, param: 'refill_amount' },
      { body: { name: 'x', chain: 'bitcoin', threshold: '1', auto_refill_enabled: true, refill_from_wallet_id: funding.id }, status: 400, param: 'refill_from_wallet_id' },
      { body: { name: 'x', chain: 'solana', threshold: '1', auto_refill_enabled: true, refill_from_wallet_id: solanaWallet.id }, status: 400, param: 'refill_amount' },
      { body: { name: 'x', chain: 'solana', threshold: '1', auto_refill_enabled: true, refill_amount: '1' }, status: 400, param: 'refill_from_wallet_id' },
      { body: { name: 'x', chain: 'solana', threshold: '1', refill_from_wallet_id: (await createWallet('solana', other)).id }, status: 404, param: 'refill_from_wallet_id', code: 'resource_missing' },
      { body: { name: 'x', chain: 'solana', threshold: '1', colour: 'red' }, status: 400, param: '' },
    ];
    for (const { body, status, param, code } of cases) {
      const response = await call('POST', '/v1/gas-stations', body);
      assert.equal(response.status, status, `${JSON.stringify(body)}: ${response.text}`);
      if (param) assert.equal(response.body.error.param, param, JSON.stringify(body));
      assert.equal(response.body.error.code, code ?? 'validation_failed');
    }
    const listed = (await call('GET', '/v1/gas-stations?limit=100')).body.data as Station[];
    assert.deepEqual(listed.map((station) => station.chain).sort(), ['ethereum', 'tron'], 'no refused request left a station');
  });

  it('lists in cursor pages, newest first; reads and patches one; other organizations and environments see nothing', async () => {
    const solana = await call('POST', '/v1/gas-stations', { name: 'SOL gas', chain: 'solana', threshold: '0.5' });
    assert.equal(solana.status, 201, solana.text);
    const first = await call('GET', '/v1/gas-stations?limit=2');
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.has_more, true);
    assert.deepEqual(first.body.data.map((station: Station) => station.chain), ['solana', 'tron']);
    const second = await call('GET', `/v1/gas-stations?limit=2&cursor=${first.body.next_cursor}`);
    assert.deepEqual(second.body.data.map((station: Station) => station.chain), ['ethereum']);
    assert.equal(second.body.has_more, false);

    const read = await call('GET', `/v1/gas-stations/${ethereum.id}`);
    assert.equal(read.status, 200);
    assert.deepEqual(read.body, { ...ethereum, balance_source: 'chain' }, 'as created, its balance read from the node now');

    const patched = await call('PATCH', `/v1/gas-stations/${ethereum.id}`, { name: 'ETH fuel', threshold: '0.02', gas_strategy: 'economy', max_gas_price: '120', daily_sponsorship_budget: '2', refill_amount: '0.25' });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.body.name, 'ETH fuel');
    assert.equal(patched.body.threshold_raw, '20000000000000000');
    assert.equal(patched.body.gas_strategy, 'economy');
    assert.equal(patched.body.max_gas_price, '120');
    assert.equal(patched.body.daily_sponsorship_budget_raw, '2000000000000000000');
    assert.equal(patched.body.refill_amount, '0.25');
    assert.equal(patched.body.refill_from_wallet_id, funding.id, 'omitted fields are unchanged');
    assert.equal(patched.body.chain, 'ethereum');

    const badPatches: { body: Record<string, unknown>; param: string }[] = [
      { body: { threshold: 'lots' }, param: 'threshold' },
      { body: { refill_from_wallet_id: (await createWallet('tron')).id }, param: 'refill_from_wallet_id' },
      { body: { refill_from_wallet_id: ethereum.wallet_id }, param: 'refill_from_wallet_id' },
      { body: { refill_from_wallet_id: null, auto_refill_enabled: true }, param: 'refill_from_wallet_id' },
      // No station sponsors without limits: a bigger cap is a bigger number.
      { body: { max_gas_price: null }, param: 'max_gas_price' },
      { body: { daily_sponsorship_budget: null }, param: 'daily_sponsorship_budget' },
      { body: { chain: 'bitcoin' }, param: '' },
    ];
    for (const { body, param } of badPatches) {
      const response = await call('PATCH', `/v1/gas-stations/${ethereum.id}`, body);
      assert.equal(response.status, 400, `${JSON.stringify(body)}: ${response.text}`);
      if (param) assert.equal(response.body.error.param, param);
    }
    const unchanged = (await call('GET', `/v1/gas-stations/${ethereum.id}`)).body;
    assert.deepEqual([unchanged.refill_from_wallet_id, unchanged.max_gas_price, unchanged.daily_sponsorship_budget], [funding.id, '120', '2'], 'a refused patch changes nothing');

    const live = (await org.key(['*'], 'live')).secret;
    for (const key of [other.secret, live]) {
      assert.equal((await call('GET', `/v1/gas-stations/${ethereum.id}`, undefined, key)).status, 404);
      assert.equal((await call('PATCH', `/v1/gas-stations/${ethereum.id}`, { name: 'intruder' }, key)).status, 404);
      assert.deepEqual((await call('GET', '/v1/gas-stations', undefined, key)).body.data, []);
    }
    const reader = (await org.key(['gas_stations:read'])).secret;
    assert.equal((await call('GET', `/v1/gas-stations/${ethereum.id}`, undefined, reader)).status, 200);
    const refused = await call('PATCH', `/v1/gas-stations/${ethereum.id}`, { name: 'reader' }, reader);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'insufficient_scope');

    // A refill source moves funds out of its wallet: naming one needs transactions:write as well as gas_stations:write.
    const stationWriter = (await org.key(['gas_stations:write'])).secret;
    const needsTransactions = async (response: { status: number; body: any; text: string }) =>
      assert.deepEqual([response.status, response.body.error?.code, response.body.error?.details?.required_scope], [403, 'insufficient_scope', 'transactions:write'], response.text);
    await needsTransactions(await call('POST', '/v1/gas-stations', { name: 'SOL gas 2', chain: 'solana', threshold: '1', refill_from_wallet_id: funding.id }, stationWriter));
    await needsTransactions(await call('PATCH', `/v1/gas-stations/${ethereum.id}`, { refill_from_wallet_id: funding.id }, stationWriter));
    const cleared = await call('PATCH', `/v1/gas-stations/${ethereum.id}`, { refill_from_wallet_id: null }, stationWriter);
    assert.deepEqual([cleared.status, cleared.body.refill_from_wallet_id], [200, null], 'clearing the source moves nothing: no extra scope');
    const mover = (await org.key(['gas_stations:write', 'transactions:write'])).secret;
    const restored = await call('PATCH', `/v1/gas-stations/${ethereum.id}`, { refill_from_wallet_id: funding.id }, mover);
    assert.deepEqual([restored.status, restored.body.refill_from_wallet_id], [200, funding.id], restored.text);
  });

  it('shows the ledger balance, saying so, when no node serves the chain (live without a configured node)', async () => {
    const live = (await org.key(['*'], 'live')).secret;
    const created = await call('POST', '/v1/gas-stations', { name: 'Live BTC gas', chain: 'bitcoin', threshold: '0.001' }, live);
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.network, 'mainnet');
    assert.equal(created.body.balance, '0');
    assert.equal(created.body.balance_source, 'ledger');
    assert.equal(created.body.health_status, 'low');
    assert.deepEqual((await call('GET', '/v1/gas-stations', undefined, live)).body.data.map((station: Station) => station.id), [created.body.id]);
  });

  it('refills through the sending machinery: a send from the wallet to the station, settled on the Ethereum devnet', async () => {
    const deposit = await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: funding.address, asset: 'ETH', amount: '1' });
    assert.equal(deposit.status, 201, deposit.text);
    await mine(2);
    await eventually(async () => {
      const rows = (await call('GET', `/v1/wallets/${funding.id}/balances`)).body.data as { asset_id: string; balance: string }[];
      return rows.find((row) => row.asset_id === 'ETH' && row.balance === '1000000000000000000') ? true : undefined;
    }, 'the deposit credited to the funding wallet');

    const wrongChain = await call('POST', `/v1/gas-stations/${ethereum.id}/refill`, { source_wallet_id: (await createWallet('tron')).id, amount: '0.1' });
    assert.equal(wrongChain.status, 400);
    assert.equal(wrongChain.body.error.param, 'source_wallet_id');
    const tooMuch = await call('POST', `/v1/gas-stations/${ethereum.id}/refill`, { source_wallet_id: funding.id, amount: '5' });
    assert.equal(tooMuch.status, 400);
    assert.equal(tooMuch.body.error.code, 'insufficient_funds');

    const refill = await call('POST', `/v1/gas-stations/${ethereum.id}/refill`, { source_wallet_id: funding.id, amount: '0.3' });
    assert.equal(refill.status, 201, refill.text);
    assert.equal(refill.body.object, 'transaction');
    assert.equal(refill.body.status, 'pending');
    assert.equal(refill.body.wallet_id, funding.id);
    assert.equal(refill.body.to_address, ethereum.address);
    assert.equal(refill.body.amount, '0.3');
    assert.equal(refill.body.asset_id, 'ETH');
    assert.equal(refill.body.fee_level, 'low', 'the station strategy economy pays at the low level');
    assert.equal(refill.body.workflow_id, `transaction-${refill.body.id}`);

    const settled = await eventually(
      async () => {
        const transaction = (await call('GET', `/v1/transactions/${refill.body.id}`)).body;
        if (transaction.status === 'confirmed') return transaction;
        if (transaction.status === 'broadcast' || transaction.status === 'confirming') await mine(1);
        return undefined;
      },
      'the refill confirmed',
      60_000,
      1_000,
    );
    assert.equal(settled.recipient_amount_raw, '300000000000000000');
    const station = (await call('GET', `/v1/gas-stations/${ethereum.id}`)).body as Station;
    assert.equal(station.balance, '300000000000000000');
    assert.equal(station.health_status, 'healthy');
  });
});
