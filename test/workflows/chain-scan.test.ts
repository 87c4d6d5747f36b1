import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { createWalletClient, http, parseEther, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { IncomingTransfer } from '../../src/monitoring/entities';
import { chainAdvancedSignal, chainScanFlow, chainScanWorkflowId, scanThroughUpdate } from '../../src/monitoring/flows/chain-scan';
import { workflowBundle } from '../../src/worker-setup';
import { ANVIL_CHAIN_ID, startAnvil, type Anvil } from '../support/anvil';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { HISTORY_EVENTS_PER_RUN } from '../../src/temporal/flow';
import { localTemporal, testOrm } from '../support/environment';
import { eventually, within } from '../support/eventually';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { resetScanState, terminateWorkflows } from '../support/scanning';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const ANVIL_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

/*
 * On the local dev server (the real Temporal server), not the time-skipping one: these tests send workflow
 * updates, and the time-skipping test server at times refuses the completion of an activation that answers
 * one ("invalid history builder state for action"), after which the task waits for a timeout on a clock that
 * does not move: the file hung in CI and in three runs of four alone. Its scans wait a fraction of a second
 * between passes instead of skipping seconds.
 */
describe('chainScanWorkflow (local dev server, against anvil)', () => {
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  const taskQueue = `chain-scan-${randomUUID()}`;
  const config: Record<string, string> = {};
  const workflowId = chainScanWorkflowId('ethereum', 'sandbox');

  const send = (to: Hex, ether: string) =>
    createWalletClient({ account: privateKeyToAccount(ANVIL_KEY), transport: http(anvil.url) }).sendTransaction({ to, value: parseEther(ether), chain: null });
  const mine = (blocks: number) => anvil.call('anvil_mine', [`0x${blocks.toString(16)}`]);
  const tip = async () => Number(await anvil.call('eth_blockNumber'));

  before(async () => {
    anvil = await startAnvil();
    await resetScanState('ethereum');
    Object.assign(config, {
      ...NO_SEARCH_ATTRIBUTES,
      TEMPORAL_TASK_QUEUE: taskQueue,
      CHAIN_NODE_ETHEREUM_SANDBOX: anvil.url,
      CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID: String(ANVIL_CHAIN_ID),
      CHAIN_CONFIRMATIONS_ETHEREUM: '2',
    });
    // The process's dev server is shared with the files before and after this one: no scanner of this chain may run on it meanwhile.
    await terminateWorkflows((await localTemporal()).client, [workflowId]);
    app = await startTestApp({ config, temporal: await localTemporal() });
    org = await createTestOrganization('Chain scan');
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, [workflowId]);
    await resetScanState('ethereum');
    await app?.close();
    await anvil?.stop();
  });

  /**
   * A worker's work, bounded within the test's own timeout: a hang fails with its name, and the worker's runUntil then
   * stops the worker, so that the file's time-skipping server can be released and the process's next files are not
   * left beside a worker polling a server that is gone.
   */
  const bounded = <T>(what: string, work: () => Promise<T>, timeoutMs = 50_000) => within(work(), what, timeoutMs);

  async function ourAddress(): Promise<{ walletId: string; address: Hex }> {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Scan' } });
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'Scan', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' } });
    return { walletId: wallet.body.id, address: wallet.body.primary_address.address };
  }

  it('credits each transfer once across a worker restart: the cursor, not the worker, remembers the last block', async () => {
    const env = await localTemporal();
    const { walletId, address } = await ourAddress();
    const first = await createTestWorker(env, taskQueue, config, 0);
    const handle = await first.worker.runUntil(bounded('the first worker\'s scans', async () => {
      const started = await env.client.workflow.start(chainScanFlow.workflowType, { taskQueue, workflowId, args: [{ chain: 'ethereum', environment: 'sandbox', intervalSeconds: 0.2 }] });
      // A real node is scanned from the tip the scanner first saw: let it see one before sending.
      assert.equal((await started.executeUpdate(scanThroughUpdate, { args: [{ height: await tip(), waitSeconds: 30 }] })).reached, true);
      await send(address, '1');
      await mine(2);
      // The update answers once the scanner has processed the tip: no polling of the database.
      const through = await started.executeUpdate(scanThroughUpdate, { args: [{ height: await tip(), waitSeconds: 30 }] });
      assert.equal(through.reached, true);
      return started;
    }));

    // No worker: two more transfers are mined (anvil mines each in a block of its own), the first well past the depth.
    await send(address, '2');
    await mine(3);
    await send(address, '4');

    const second = await createTestWorker(env, taskQueue, config, 0);
    await second.worker.runUntil(bounded('the second worker\'s scans', async () => {
      await handle.signal(chainAdvancedSignal);
      const through = await handle.executeUpdate(scanThroughUpdate, { args: [{ height: await tip(), waitSeconds: 30 }] });
      assert.equal(through.reached, true);
      const em = (await testOrm()).em.fork();
      const rows = await eventually(async () => {
        const found = await em.fork().find(IncomingTransfer, { wallet: walletId }, { orderBy: { blockHeight: 'asc' } });
        return found.length === 3 && found.filter((row) => row.status === 'confirmed').length === 2 ? found : undefined;
      }, 'three transfers, two confirmed');
      assert.deepEqual(
        rows.map((row) => [row.amount, row.status]),
        [
          [parseEther('1').toString(), 'confirmed'],
          [parseEther('2').toString(), 'confirmed'],
          [parseEther('4').toString(), 'pending'],
        ],
      );
      const balances = await app.request('GET', `/v1/wallets/${walletId}/balances`, { key: org.secret });
      const eth = (balances.body.data as { asset_id: string; balance: string; pending: string }[]).find((row) => row.asset_id === 'ETH')!;
      assert.equal(eth.balance, parseEther('3').toString(), 'each confirmed transfer credited exactly once');
      assert.equal(eth.pending, parseEther('4').toString());
    }));
    await handle.terminate('test finished');
    await recordHistoryIfAsked(handle, 'chain-scan');
  });

  it('continues as new once its history reaches the bound, and the next run answers updates', async function () {
    const env = await localTemporal();
    const { worker } = await createTestWorker(env, taskQueue, config);
    await worker.runUntil(bounded('the scans up to the continue-as-new', async () => {
      const started = await env.client.workflow.start(chainScanFlow.workflowType, { taskQueue, workflowId, args: [{ chain: 'ethereum', environment: 'sandbox', intervalSeconds: 1 }] });
      const first = env.client.workflow.getHandle(workflowId, started.firstExecutionRunId);
      // Caught up, each pass (about ten events with the signal that wakes it) follows the last at once: the dev server
      // fires timers on the second, so the scanner is woken rather than left to wait out its interval. Woken only
      // until a pass or two short of the bound: a run cannot continue as new while signals keep arriving.
      const status = await eventually(async () => {
        const { status: { name }, historyLength } = await first.describe();
        if (name !== 'RUNNING') return name;
        if (historyLength < HISTORY_EVENTS_PER_RUN - 20) await first.signal(chainAdvancedSignal).catch(() => undefined);
        return undefined;
      }, 'the first run to continue as new', 60_000, 20);
      assert.equal(status, 'CONTINUED_AS_NEW');
      const events = (await first.fetchHistory()).events?.length ?? 0;
      assert.ok(events >= HISTORY_EVENTS_PER_RUN && events < HISTORY_EVENTS_PER_RUN + 20, `${events} events in the first run`);
      await recordHistoryIfAsked(first, 'chain-scan-continued');
      await mine(1);
      const through = await env.client.workflow.getHandle(workflowId).executeUpdate(scanThroughUpdate, { args: [{ height: await tip(), waitSeconds: 30 }] });
      assert.equal(through.reached, true);
    }, 90_000));
    await env.client.workflow.getHandle(workflowId).terminate('test finished');
  });

  it('replays the recorded scanning histories with the current workflow code', async () => {
    const bundle = await workflowBundle();
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('chain-scan'), 'chain-scan');
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('chain-scan-continued'), 'chain-scan-continued');
  });
});
