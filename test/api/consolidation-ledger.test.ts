import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { ChainNodes } from '../../src/chains/nodes';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { toBaseUnits } from '../../src/shared/money';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { sandboxScannedHeight, terminateWorkflows } from '../support/scanning';
import { testLogger } from '../support/secret-scan';
import { createTestWorker } from '../support/worker';

interface Run {
  id: string;
  status: string;
  addresses_scanned: number;
  transfers_created: number;
  transfers_confirmed: number;
  transfers_failed: number;
  per_asset_totals: { asset_address: string | null; asset_symbol: string; amount_swept: string; sweep_count: number }[];
  fees: { total_usd: string; breakdown: { kind: string; currency: string; amount: string }[] };
  failure_reason: string | null;
}

interface Sweep {
  status: string;
  amount: string;
  is_native: boolean;
  destination_address: string;
  transaction_id: string | null;
  tx_hash: string | null;
}

interface Transaction {
  status: string;
  amount_raw: string;
  recipient_amount_raw: string;
  fee_raw: string | null;
}

/**
 * Consolidation runs on the Ethereum devnet through the real API, Temporal and PostgreSQL, with
 * block scanning on: after each run the ledger of every wallet of the organization equals what the
 * chain says its addresses hold, and the destination holds what the run says it swept.
 */
describe('Consolidation: the ledger invariant after every run (Ethereum devnet)', () => {
  let app: TestApp;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  const taskQueue = `consolidation-ledger-${randomUUID()}`;
  const config = {
    TEMPORAL_TASK_QUEUE: taskQueue,
    DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
    CHAIN_SCAN_INTERVAL_SECONDS: '0.2',
    CHAIN_CONFIRMATIONS_ETHEREUM: '2',
  };

  before(async () => {
    app = await startTestApp({ config });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Consolidation ledger');
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, [devnetBlocksWorkflowId('ethereum'), chainScanWorkflowId('ethereum', 'sandbox')]);
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const chainBalance = async (address: string, assetId: string) => (await app.deps.chains.provider('ethereum', 'sandbox')).balance(address, assetId);
  /**
   * Mines `count` devnet blocks and answers once scanning has processed them. The route waits 10 s for the scan
   * (`scanned`); on a machine at load 25 a pass can take longer, so then the scan's cursor is watched a while more.
   */
  const mine = async (count = 1) => {
    const mined = await call('POST', '/v1/sandbox/chains/ethereum/blocks', { count });
    assert.equal(mined.status, 200, mined.text);
    if (mined.body.scanned === true) return;
    const tip = mined.body.height as number;
    await eventually(async () => ((await sandboxScannedHeight('ethereum')) >= tip ? true : undefined), `scanning caught up with the tip ${tip}`, 60_000, 250);
  };
  const deposit = async (address: string, asset: string, amount: string) => {
    const made = await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address, asset, amount });
    assert.equal(made.status, 201, made.text);
  };
  async function ledger(walletId: string, assetId: string) {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string }[];
    return BigInt(rows.find((candidate) => candidate.asset_id === assetId)?.balance ?? '0');
  }
  async function credited(walletId: string, assetId: string, amount: bigint) {
    await eventually(async () => ((await ledger(walletId, assetId)) === amount ? true : undefined), `${assetId} credited to wallet ${walletId}`, 30_000, 300);
  }
  async function createVault(name: string) {
    const created = await call('POST', '/v1/vaults', { name });
    assert.equal(created.status, 201, created.text);
    return created.body.id as string;
  }
  async function createWallet(vaultId: string, name: string) {
    const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vaultId, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    return { id: created.body.id as string, address: created.body.primary_address.address as string };
  }
  async function createRule(body: Record<string, unknown>) {
    const created = await call('POST', '/v1/consolidation/rules', { chain: 'ethereum', trigger_type: 'manual', ...body });
    assert.equal(created.status, 201, created.text);
    return created.body.id as string;
  }
  /** Starts a manual run and mines a block a round until it settles (each sweep, and each fuel, waits for its confirmations). */
  async function runToEnd(ruleId: string): Promise<{ run: Run; sweeps: Sweep[] }> {
    const started = await call('POST', `/v1/consolidation/rules/${ruleId}/runs`);
    assert.equal(started.status, 202, started.text);
    const run = await eventually(
      async () => {
        const current = (await call('GET', `/v1/consolidation/runs/${started.body.id}`)).body as Run;
        if (['completed', 'partially_failed', 'failed'].includes(current.status)) return current;
        await mine();
        return undefined;
      },
      `run ${started.body.id} settled`,
      60_000,
      500,
    );
    const sweeps = (await call('GET', `/v1/consolidation/runs/${run.id}/sweeps`)).body.data as Sweep[];
    return { run, sweeps };
  }
  const transactionOf = async (sweep: Sweep) => (await call('GET', `/v1/transactions/${sweep.transaction_id}`)).body as Transaction;

  /** The ledger invariant for every wallet of the organization, scanning caught up with a freshly mined tip. */
  async function ledgerMatchesChain(wallets: number) {
    await mine();
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), await nodes.provider('ethereum', 'sandbox'), {
      chain: 'ethereum',
      environment: 'sandbox',
      organizationId: org.organizationId,
      assetIds: ['ETH', 'USDC_ETH'],
    });
    assert.equal(result.wallets, wallets);
    assert.deepEqual(result.mismatches, []);
  }

  let source: string;
  let first: { id: string; address: string };
  let second: { id: string; address: string };

  it('native sweeps paying their own gas, from two wallets to an address book entry: the destination holds what the sweeps delivered, the run reports what arrived, the ledger equals the chain', async function () {
    this.timeout(180_000);
    source = await createVault('Deposits');
    first = await createWallet(source, 'Customer one');
    second = await createWallet(source, 'Customer two');
    await deposit(first.address, 'ETH', '1');
    await deposit(second.address, 'ETH', '0.5');
    await deposit(first.address, 'USDC_ETH', '100');
    await deposit(second.address, 'USDC_ETH', '40.25');
    await mine(2);
    await credited(first.id, 'ETH', toBaseUnits('1', 18));
    await credited(second.id, 'ETH', toBaseUnits('0.5', 18));
    await credited(first.id, 'USDC_ETH', toBaseUnits('100', 6));
    await credited(second.id, 'USDC_ETH', toBaseUnits('40.25', 6));

    const cold = privateKeyToAccount(generatePrivateKey()).address;
    const entry = await call('POST', '/v1/address-book', { chain: 'ethereum', address: cold, label: 'Cold storage' });
    assert.equal(entry.status, 201, entry.text);
    const ruleId = await createRule({ vault_id: source, destination_type: 'address_book', destination_address_book_id: entry.body.id, gas_source: 'wallet', assets: [{ is_native: true }] });

    const { run, sweeps } = await runToEnd(ruleId);
    assert.equal(run.status, 'completed', JSON.stringify(run));
    assert.equal(run.addresses_scanned, 2);
    assert.deepEqual([run.transfers_created, run.transfers_confirmed, run.transfers_failed], [2, 2, 0]);
    assert.equal(sweeps.length, 2);
    assert.ok(
      sweeps.every((sweep) => sweep.status === 'confirmed' && sweep.is_native && sweep.tx_hash && sweep.destination_address === entry.body.address),
      JSON.stringify(sweeps),
    );

    const sends = await Promise.all(sweeps.map(transactionOf));
    const received = sends.reduce((sum, send) => sum + BigInt(send.recipient_amount_raw), 0n);
    const taken = sends.reduce((sum, send) => sum + BigInt(send.amount_raw), 0n);
    const fees = sends.reduce((sum, send) => sum + BigInt(send.fee_raw!), 0n);
    assert.equal(await chainBalance(cold, 'ETH'), received, 'the destination holds what the sweeps delivered');
    assert.deepEqual(
      run.per_asset_totals.map(({ asset_address, asset_symbol, sweep_count }) => ({ asset_address, asset_symbol, sweep_count })),
      [{ asset_address: null, asset_symbol: 'ETH', sweep_count: 2 }],
    );
    // A native sweep is gross: it takes the whole amount and pays its fee out of it. amount_swept is what reached the
    // destination (each source keeps its fee limit less the fee it paid).
    assert.equal(toBaseUnits(run.per_asset_totals[0]!.amount_swept, 18), received, 'amount_swept: what the destination received');
    assert.equal(taken, toBaseUnits('1.5', 18), "everything the sources held");
    assert.equal(
      (await chainBalance(first.address, 'ETH')) + (await chainBalance(second.address, 'ETH')),
      taken - received - fees,
      `the sources keep what the fee limits reserved beyond the fees paid (destination received ${received}, fees ${fees})`,
    );
    assert.deepEqual(
      run.fees.breakdown.map(({ kind, currency, amount }) => ({ kind, currency, amount: toBaseUnits(amount, 18) })),
      [{ kind: 'network_fee', currency: 'ETH', amount: fees }],
      'each swept address paid its own fee',
    );
    await ledgerMatchesChain(2);
  });

  it('token sweeps with gas from a gas station to another vault: the destination holds what the run swept, the ledger equals the chain', async function () {
    this.timeout(180_000);
    const treasuryVault = await createVault('Treasury');
    const treasury = await createWallet(treasuryVault, 'Treasury ETH');
    const created = await call('POST', '/v1/gas-stations', { name: 'ETH gas', chain: 'ethereum', threshold: '0' });
    assert.equal(created.status, 201, created.text);
    const station = created.body as { id: string; address: string; wallet_id: string; balance: string };
    await deposit(station.address, 'ETH', '1');
    await mine(2);
    await credited(station.wallet_id, 'ETH', toBaseUnits('1', 18));
    const ruleId = await createRule({
      vault_id: source,
      destination_type: 'vault',
      destination_vault_id: treasuryVault,
      gas_source: 'customer_gas_station',
      gas_station_id: station.id,
      assets: [{ symbol: 'USDC' }],
    });

    const { run, sweeps } = await runToEnd(ruleId);
    assert.equal(run.status, 'completed', JSON.stringify(run));
    assert.deepEqual([run.transfers_created, run.transfers_confirmed, run.transfers_failed], [2, 2, 0]);
    assert.ok(
      sweeps.every((sweep) => sweep.status === 'confirmed' && !sweep.is_native && sweep.tx_hash && sweep.destination_address === treasury.address),
      JSON.stringify(sweeps),
    );
    assert.deepEqual(run.per_asset_totals, [{ asset_address: run.per_asset_totals[0]!.asset_address, asset_symbol: 'USDC', amount_swept: '140.25', sweep_count: 2 }]);
    assert.ok(run.per_asset_totals[0]!.asset_address, "the token's contract");
    assert.equal(await chainBalance(treasury.address, 'USDC_ETH'), toBaseUnits(run.per_asset_totals[0]!.amount_swept, 6), 'the destination holds what the run says it swept');
    assert.equal(await chainBalance(first.address, 'USDC_ETH'), 0n);
    assert.equal(await chainBalance(second.address, 'USDC_ETH'), 0n);
    const fees = (await Promise.all(sweeps.map(transactionOf))).reduce((sum, send) => sum + BigInt(send.fee_raw!), 0n);
    assert.deepEqual(
      run.fees.breakdown.map(({ kind, currency, amount }) => ({ kind, currency, amount: toBaseUnits(amount, 18) })),
      [{ kind: 'gas_sponsorship', currency: 'ETH', amount: fees }],
      'the station paid the sweeps',
    );
    await credited(treasury.id, 'USDC_ETH', toBaseUnits('140.25', 6));
    // The two sources, the treasury and the station's wallet.
    await ledgerMatchesChain(4);
  });
});
