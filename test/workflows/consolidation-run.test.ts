import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { ServiceWorkers } from '../../src/worker-setup';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { ConsolidationRule, ConsolidationRun, ConsolidationSweep, type ConsolidationAsset, type GasSource } from '../../src/consolidation/entities';
import { consolidationRunFlow } from '../../src/consolidation/flows/run';
import { triggerRun } from '../../src/consolidation/runs';
import { Vault } from '../../src/custody/entities';
import { Event } from '../../src/events/entities';
import { GasStation } from '../../src/gas-stations/entities';
import { Organization } from '../../src/organizations/entities';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { workflowBundle } from '../../src/worker-setup';
import { sweepStarts } from '../support/cards';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { releaseTimeSkippingTemporal, testOrm, timeSkippingTemporal } from '../support/environment';
import { eventually, within } from '../support/eventually';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { mineAndScan } from '../support/scanning';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const ETHER = 10n ** 18n;
const USDC = 10n ** 6n;
const USDC_ASSET: ConsolidationAsset = { asset_id: 'USDC_ETH', symbol: 'USDC', contract_address: null, is_native: false, min_amount_to_move: '1', min_balance_to_leave: '0' };
const ETH_ASSET: ConsolidationAsset = { asset_id: 'ETH', symbol: 'ETH', contract_address: null, is_native: true, min_amount_to_move: '0.01', min_balance_to_leave: '0' };

describe('consolidationRunWorkflow (time-skipping, the Ethereum devnet)', () => {
  let app: TestApp;
  let org: TestOrganization;
  let worker: ServiceWorkers;
  let running: Promise<void>;
  const taskQueue = `consolidation-run-${randomUUID()}`;
  const config = { ...NO_SEARCH_ATTRIBUTES, TEMPORAL_TASK_QUEUE: taskQueue, CHAIN_CONFIRMATIONS_ETHEREUM: '2', DEVNET_BLOCK_INTERVAL_SECONDS: '3600' };

  // A worker stopped mid-flow runs without a workflow cache: it leaves no sticky queue behind, whose tasks would hold
  // the time-skipping server's clock for good. The others cache, as the service does: no history replayed per task.
  const startWorker = async (env: TestWorkflowEnvironment, cache: 'cache' | 'no cache' = 'cache') => {
    ({ worker } = await createTestWorker(env, taskQueue, config, cache === 'cache' ? undefined : 0));
    running = worker.run();
  };
  const stopWorker = async () => {
    worker.shutdown();
    await running;
  };
  before(async () => {
    const env = await timeSkippingTemporal();
    app = await startTestApp({ config, temporal: env });
    org = await createTestOrganization('Consolidation runs');
    await startWorker(env);
  });
  after(async () => {
    await stopWorker();
    await app?.close();
    await releaseTimeSkippingTemporal();
  });

  const em = async () => (await testOrm()).em.fork();
  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const provider = () => app.deps.chains.provider('ethereum', 'sandbox');
  /** `amount` of `assetId` at `address` on the devnet, credited to its wallet's ledger by scanning (no scanner workflow runs here). */
  async function credit(address: string, assetId: string, amount: bigint) {
    await fundFromFaucet(await em(), 'ethereum', { to: address, assetId, amount });
    await mineAndScan(app, 'ethereum', 2);
  }
  async function wallet(vaultId: string, name: string) {
    const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vaultId });
    assert.equal(created.status, 201, created.text);
    return { id: created.body.id as string, address: created.body.primary_address.address as string };
  }
  async function createRule(vaultId: string, destinationVaultId: string, gasSource: GasSource, assets: ConsolidationAsset[], stationId?: string) {
    const orm = await em();
    const rule = orm.create(ConsolidationRule, {
      organization: orm.getReference(Organization, org.organizationId),
      environment: 'sandbox',
      vault: orm.getReference(Vault, vaultId),
      chain: 'ethereum',
      network: 'sepolia',
      destinationType: 'vault',
      destinationVault: orm.getReference(Vault, destinationVaultId),
      gasSource,
      gasStation: stationId ? orm.getReference(GasStation, stationId) : null,
      assets,
      triggerType: 'manual',
    });
    await orm.flush();
    return rule.id;
  }
  /** Starts a run of the rule as the manual trigger does (its recorded start fired here by the test). */
  async function run(ruleId: string) {
    const env = await timeSkippingTemporal();
    const triggered = await (await em()).transactional((tx) => triggerRun(tx, ruleId, { source: 'manual', userId: org.apiKeyId }));
    const runId = triggered!.run.id;
    const handle = await env.client.workflow.start('consolidationRunWorkflow', { taskQueue, workflowId: consolidationRunFlow.workflowId({ runId }), args: [{ runId }] });
    return { runId, handle };
  }
  /**
   * Mines and scans a block every 300 ms while the run goes (each send, fuel and sweep waits for its confirmations, a
   * sponsored sweep for its fuel on the sender's books), for at most `timeoutMs`: a run that never ends fails its test
   * and stops the mining, not the tests after it.
   */
  async function mineWhile<T>(work: Promise<T>, timeoutMs = 150_000): Promise<T> {
    let mining = true;
    const miner = (async () => {
      while (mining) {
        await mineAndScan(app, 'ethereum', 1);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    })();
    try {
      return await within(work, 'the consolidation run to end', timeoutMs);
    } finally {
      mining = false;
      await miner;
    }
  }
  const sweepsOf = async (runId: string) => (await em()).find(ConsolidationSweep, { run: runId }, { populate: ['transaction', 'sourceAddress'], orderBy: { createdAt: 'asc' } });
  const readRun = async (runId: string) => (await em()).findOneOrFail(ConsolidationRun, { id: runId }, { populate: ['rule'] });

  let vault: string;
  let destination: { id: string; address: string };
  let first: { id: string; address: string };
  let second: { id: string; address: string };
  let third: { id: string; address: string };
  let station: { id: string; address: string; wallet_id: string };
  let ruleId: string;

  it('sweeps tokens with gas from the gas station and the native coin paying its own fee; the run ends completed', async () => {
    vault = (await call('POST', '/v1/vaults', { name: 'Deposits' })).body.id;
    const treasury = (await call('POST', '/v1/vaults', { name: 'Treasury' })).body.id;
    destination = await wallet(treasury, 'Treasury ETH');
    const one = await wallet(vault, 'Customer one');
    first = one;
    const extra = await call('POST', `/v1/wallets/${one.id}/addresses`, { label: 'second' });
    second = { id: one.id, address: extra.body.address };
    third = await wallet(vault, 'Customer two');
    station = (await call('POST', '/v1/gas-stations', { name: 'ETH gas', chain: 'ethereum', threshold: '0' })).body;
    await credit(station.address, 'ETH', ETHER);
    await credit(first.address, 'USDC_ETH', 100n * USDC);
    await credit(second.address, 'USDC_ETH', 50n * USDC);
    await credit(third.address, 'ETH', ETHER / 5n);
    ruleId = await createRule(vault, treasury, 'customer_gas_station', [USDC_ASSET, ETH_ASSET], station.id);

    const { runId, handle } = await run(ruleId);
    assert.equal(await mineWhile(handle.result()), 'completed');
    const finished = await readRun(runId);
    assert.equal(finished.status, 'completed');
    assert.equal(finished.addressesScanned, 3, "the vault's three addresses: not the treasury's, not the station's");
    assert.deepEqual([finished.transfersCreated, finished.transfersConfirmed, finished.transfersFailed], [3, 3, 0]);
    assert.equal(finished.rule.activeRunId, null, 'the rule is free for its next run');

    const sweeps = await sweepsOf(runId);
    assert.deepEqual(
      sweeps.map((sweep) => [sweep.sourceAddress.address, sweep.assetId, sweep.status]).sort(),
      [
        [first.address, 'USDC_ETH', 'confirmed'],
        [second.address, 'USDC_ETH', 'confirmed'],
        [third.address, 'ETH', 'confirmed'],
      ].sort(),
    );
    const node = await provider();
    assert.equal(await node.balance(destination.address, 'USDC_ETH'), 150n * USDC, 'every token swept');
    const native = sweeps.find((sweep) => sweep.assetId === 'ETH')!;
    assert.equal(await node.balance(destination.address, 'ETH'), ETHER / 5n - BigInt(native.transaction!.feeLimit), 'the native sweep paid its fee out of the amount (gross)');
    assert.equal(await node.balance(first.address, 'ETH'), 0n, 'the gas station paid the token sweeps exactly');
    assert.equal(await node.balance(second.address, 'ETH'), 0n);
    assert.equal((await node.balance(third.address, 'ETH')) , ETHER / 5n - BigInt(native.transaction!.recipientAmount) - BigInt(native.transaction!.fee!));
    const events = (await (await em()).find(Event, { organization: org.organizationId }, { orderBy: { createdAt: 'asc' } })).map((event) => event.type).filter((type) => type.startsWith('consolidation.'));
    assert.deepEqual(events, ['consolidation.run.started', 'consolidation.run.completed']);
    await recordHistoryIfAsked(handle, 'consolidation-run');
  });

  it('a run with a failed sweep ends partially_failed; the failure is reported with its reason', async () => {
    await credit(first.address, 'USDC_ETH', 20n * USDC);
    await credit(third.address, 'ETH', ETHER / 10n);
    // The station may sponsor nothing more today: the token sweep is refused, the native one goes.
    const patched = await call('PATCH', `/v1/gas-stations/${station.id}`, { daily_sponsorship_budget: '0' });
    assert.equal(patched.status, 200, patched.text);
    const { runId, handle } = await run(ruleId);
    assert.equal(await mineWhile(handle.result()), 'partially_failed');
    const sweeps = await sweepsOf(runId);
    const token = sweeps.find((sweep) => sweep.assetId === 'USDC_ETH')!;
    assert.equal(token.status, 'failed');
    assert.equal(token.failureReason, 'sponsorship_unavailable');
    assert.equal(token.transaction, null, 'refused before anything was sent');
    assert.equal(sweeps.find((sweep) => sweep.assetId === 'ETH')!.status, 'confirmed');
    const finished = await readRun(runId);
    assert.deepEqual([finished.transfersCreated, finished.transfersConfirmed, finished.transfersFailed], [1, 1, 1]);
    const types = (await (await em()).find(Event, { organization: org.organizationId }, { orderBy: { createdAt: 'asc' } })).map((event) => event.type);
    assert.ok(types.includes('consolidation.sweep.failed'));
    assert.equal(types.at(-1), 'consolidation.run.failed');
    // Raising the budget back would be a loosening, a change request under the quorum (docs/policies.md, "Governance"): the test restores the default itself.
    await (await em()).nativeUpdate(GasStation, { id: station.id }, { dailySponsorshipBudget: null });
  });

  it('a worker stopped mid-run and another started: the run resumes and no sweep is made twice', async function () {
    this.timeout(180_000);
    const env = await timeSkippingTemporal();
    await stopWorker();
    await startWorker(env, 'no cache');
    await credit(first.address, 'USDC_ETH', 30n * USDC);
    await credit(second.address, 'USDC_ETH', 40n * USDC);
    const { runId, handle } = await run(ruleId);
    await eventually(async () => ((await sweepsOf(runId)).filter((sweep) => sweep.status === 'submitted').length === 2 ? true : undefined), 'both sweeps submitted');
    await stopWorker();
    await mineDevnetBlocks(await em(), 'ethereum', 3);
    await startWorker(env, 'no cache');
    // Starts the stopped worker's process recorded but had not fired are fired by the start sweep (a Schedule in the service).
    await sweepStarts(env.client, taskQueue, org.organizationId);
    assert.equal(await mineWhile(handle.result()), 'completed');
    const sweeps = await sweepsOf(runId);
    assert.equal(sweeps.length, 2);
    const sends = await (await em()).find(OutgoingTransaction, { wallet: first.id, note: { $like: `Consolidation sweep % (run ${runId})` } });
    assert.equal(sends.length, 2, 'one send per sweep');
    // 150 from the first run, and now the 20 the failed sweep left plus the 30 and 40 credited since.
    assert.equal(await (await provider()).balance(destination.address, 'USDC_ETH'), 240n * USDC);
    await stopWorker();
    await startWorker(env);
  });

  it('scans a 10,000-address vault in pages, continuing as new, with every address counted once', async function () {
    this.timeout(300_000);
    const big = (await call('POST', '/v1/vaults', { name: 'Ten thousand' })).body.id as string;
    const holder = await wallet(big, 'Many addresses');
    await (await em()).execute(
      `insert into addresses (id, organization_id, wallet_id, chain, network, address, format, address_index, derivation_path, is_primary, label, created_at)
       select gen_random_uuid(), ?, ?, 'ethereum', 'sepolia', '0x' || lpad(to_hex(n), 40, '0'), 'eip55', n, 'm/44''/60''/0''/0/' || n, false, '', now()
       from generate_series(1, 9999) n`,
      [org.organizationId, holder.id],
    );
    await credit(holder.address, 'USDC_ETH', 5n * USDC);
    const bigRule = await createRule(big, (await call('POST', '/v1/vaults', { name: 'Big treasury' })).body.id, 'customer_gas_station', [USDC_ASSET], station.id);
    await wallet((await (await em()).findOneOrFail(ConsolidationRule, { id: bigRule }, { populate: ['destinationVault'] })).destinationVault!.id, 'Big treasury ETH');
    const { runId, handle } = await run(bigRule);
    assert.equal(await mineWhile(handle.result(), 270_000), 'completed');
    const finished = await readRun(runId);
    assert.equal(finished.addressesScanned, 10_000);
    assert.equal(finished.transfersConfirmed, 1);
    const description = await handle.describe();
    assert.notEqual(description.runId, handle.firstExecutionRunId, 'it continued as new');
    const history = await handle.fetchHistory();
    assert.ok((history.events ?? []).length < 500, `the last run's history stays small: ${history.events?.length} events`);
  });

  it('replays the recorded run history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('consolidation-run'), 'consolidation-run');
  });
});
