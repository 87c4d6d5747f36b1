import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import type { ServiceWorkers } from '../../src/worker-setup';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { WalletBalance } from '../../src/custody/entities';
import { toDisplay } from '../../src/shared/money';
import { Event } from '../../src/events/entities';
import { gasStationRefillWorkflowId } from '../../src/gas-stations/flows/refill';
import { HISTORY_EVENTS_PER_RUN } from '../../src/temporal/flow';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { workflowBundle } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { releaseTimeSkippingTemporal, testOrm, timeSkippingTemporal } from '../support/environment';
import { creditCustodyWallet } from '../support/ledger';
import { eventually } from '../support/eventually';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const ETHER = 10n ** 18n;

describe('refillGasStationWorkflow and gasStationCheckWorkflow (time-skipping, the Ethereum devnet)', () => {
  let app: TestApp;
  let org: TestOrganization;
  let worker: ServiceWorkers;
  let running: Promise<void>;
  const taskQueue = `gas-station-refill-${randomUUID()}`;
  const config = { ...NO_SEARCH_ATTRIBUTES, TEMPORAL_TASK_QUEUE: taskQueue, CHAIN_CONFIRMATIONS_ETHEREUM: '2', DEVNET_BLOCK_INTERVAL_SECONDS: '3600' };

  before(async () => {
    const env = await timeSkippingTemporal();
    app = await startTestApp({ config, temporal: env });
    org = await createTestOrganization('Gas station refills');
    ({ worker } = await createTestWorker(env, taskQueue, config));
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await app?.close();
    await releaseTimeSkippingTemporal();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  /** A wallet holding `amount` wei on the devnet and on its ledger (no scanner runs here). */
  async function fundedWallet(amount: bigint) {
    const vault = await call('POST', '/v1/vaults', { name: 'Funding' });
    const wallet = await call('POST', '/v1/wallets', { name: 'Funding', chain: 'ethereum', vault_id: vault.body.id });
    if (amount > 0n) {
      const em = (await testOrm()).em.fork();
      await fundFromFaucet(em, 'ethereum', { to: wallet.body.primary_address.address, assetId: 'ETH', amount });
      await mineDevnetBlocks(em, 'ethereum', 1);
      await creditCustodyWallet(em, wallet.body.id, 'ETH', amount);
    }
    return wallet.body.id as string;
  }
  const sendsFrom = async (walletId: string) => (await testOrm()).em.fork().find(OutgoingTransaction, { wallet: walletId });
  const stationEvents = async (stationId: string) =>
    (await (await testOrm()).em.fork().find(Event, { organization: org.organizationId }, { orderBy: { createdAt: 'asc' } }))
      .filter((event) => (event.data as { id?: string }).id === stationId)
      .map((event) => ({ type: event.type, data: event.data as Record<string, unknown> }));
  /** One periodic check of this organization's stations; `recordAs` names its replay fixture. */
  const runCheck = async (recordAs?: string) => {
    const env = await timeSkippingTemporal();
    const handle = await env.client.workflow.start('gasStationCheckWorkflow', { taskQueue, workflowId: `gas-station-check-${randomUUID()}`, args: [{ organizationId: org.organizationId }] });
    const result = await handle.result();
    if (recordAs) await recordHistoryIfAsked(handle, recordAs);
    return result;
  };

  it('a station created below its threshold refills exactly once, while a PATCH and the periodic check race it', async () => {
    const env = await timeSkippingTemporal();
    const source = await fundedWallet(ETHER);
    const created = await call('POST', '/v1/gas-stations', {
      name: 'ETH gas',
      chain: 'ethereum',
      threshold: '0.05',
      auto_refill_enabled: true,
      refill_amount: '0.1',
      refill_from_wallet_id: source,
    });
    assert.equal(created.status, 201, created.text);
    const stationId = created.body.id as string;
    // Two more triggers while the first refill is in flight: both join it.
    const [patched, checked] = await Promise.all([call('PATCH', `/v1/gas-stations/${stationId}`, { gas_strategy: 'fast' }), runCheck('gas-station-check')]);
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(checked, { armed: 1 });

    const refill = await eventually(async () => {
      const sends = await sendsFrom(source);
      return sends.length === 1 && sends[0]!.status === 'broadcast' ? sends[0] : undefined;
    }, 'the refill broadcast');
    assert.equal(refill.toAddress, created.body.address);
    assert.equal(refill.amount, (ETHER / 10n).toString());
    assert.equal((refill.policyRequest as Record<string, unknown>).is_automated, true);
    assert.equal((refill.policyRequest as Record<string, unknown>).automation_rule_id, stationId);
    assert.equal((refill.policyRequest as Record<string, unknown>).actor_type, 'system');

    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    const handle = env.client.workflow.getHandle(gasStationRefillWorkflowId(stationId));
    assert.equal(await handle.result(), 'refilled');
    assert.equal((await sendsFrom(source)).length, 1, 'one refill for three triggers');
    const station = await call('GET', `/v1/gas-stations/${stationId}`);
    assert.equal(station.body.balance, (ETHER / 10n).toString());
    assert.equal(station.body.health_status, 'healthy');
    const events = await stationEvents(stationId);
    assert.deepEqual(
      events.map((event) => event.type),
      ['gas_station.low_balance', 'gas_station.refilled'],
    );
    assert.equal(events[1]!.data.transaction_id, refill.id);
    await recordHistoryIfAsked(handle, 'refill-gas-station');

    // A trigger after the refill: the check arms nothing, and a PATCH's run finds the station healthy.
    assert.deepEqual(await runCheck(), { armed: 0 });
    await call('PATCH', `/v1/gas-stations/${stationId}`, { name: 'ETH gas, renamed' });
    assert.equal(await env.client.workflow.getHandle(gasStationRefillWorkflowId(stationId)).result(), 'healthy');
    assert.equal((await sendsFrom(source)).length, 1);
  });

  it('a send from the station\'s wallet that takes it below threshold refills it once that send settles', async () => {
    const env = await timeSkippingTemporal();
    const station = (await call('GET', '/v1/gas-stations')).body.data[0] as { id: string; wallet_id: string; balance: string; refill_from_wallet_id: string };
    const refillsBefore = (await sendsFrom(station.refill_from_wallet_id)).length;
    // No scanner runs here: the station wallet's ledger gets what the chain holds.
    await creditCustodyWallet((await testOrm()).em.fork(), station.wallet_id, 'ETH', BigInt(station.balance));
    const spend = await call('POST', '/v1/transactions', { wallet_id: station.wallet_id, to_address: '0x000000000000000000000000000000000000dEaD', amount: '0.08', asset: 'ETH' });
    assert.equal(spend.status, 201, spend.text);
    await eventually(async () => ((await sendsFrom(station.wallet_id))[0]?.status === 'broadcast' ? true : undefined), 'the spend broadcast');
    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    assert.equal(await env.client.workflow.getHandle(`transaction-${spend.body.id}`).result(), 'confirmed');

    const refill = await eventually(async () => {
      const sends = await sendsFrom(station.refill_from_wallet_id);
      return sends.length === refillsBefore + 1 && sends.some((send) => send.status === 'broadcast') ? sends : undefined;
    }, 'the refill the settled spend triggered');
    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    assert.equal(await env.client.workflow.getHandle(gasStationRefillWorkflowId(station.id)).result(), 'refilled');
    assert.equal(refill.length, refillsBefore + 1, 'one refill');
    const after = await call('GET', `/v1/gas-stations/${station.id}`);
    const spent = await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id: spend.body.id });
    assert.equal(after.body.balance, (BigInt(station.balance) - BigInt(spent.amount) - BigInt(spent.fee!) + ETHER / 10n).toString());
    assert.equal(after.body.health_status, 'healthy');
  });

  it('a spend crossing the threshold while two deposits arrive and two periodic checks run refills exactly once', async () => {
    const env = await timeSkippingTemporal();
    const station = (await call('GET', '/v1/gas-stations')).body.data[0] as { id: string; address: string; wallet_id: string; balance: string; threshold_raw: string; refill_from_wallet_id: string; refill_amount_raw: string };
    const refillsBefore = (await sendsFrom(station.refill_from_wallet_id)).length;
    // No scanner runs here: the station wallet's ledger is brought to what the chain holds.
    const ledger = await (await testOrm()).em.fork().findOne(WalletBalance, { wallet: station.wallet_id, assetId: 'ETH' });
    await creditCustodyWallet((await testOrm()).em.fork(), station.wallet_id, 'ETH', BigInt(station.balance) - BigInt(ledger?.balance ?? '0'));
    // Leaves 0.01 ETH less the fee: below the 0.05 threshold even with both small deposits.
    const spendAmount = BigInt(station.balance) - ETHER / 100n;
    const spend = await call('POST', '/v1/transactions', { wallet_id: station.wallet_id, to_address: '0x000000000000000000000000000000000000dEaD', amount: toDisplay(spendAmount, 18), asset: 'ETH' });
    assert.equal(spend.status, 201, spend.text);
    await eventually(async () => ((await sendsFrom(station.wallet_id)).find((send) => send.id === spend.body.id)?.status === 'broadcast' ? true : undefined), 'the spend broadcast');
    // Two deposits to the station land in the spend's blocks.
    const deposit = ETHER / 1000n;
    await Promise.all([1, 2].map(async () => fundFromFaucet((await testOrm()).em.fork(), 'ethereum', { to: station.address, assetId: 'ETH', amount: deposit })));
    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    // The spend settles (a trigger) while two periodic checks run (two more). One result awaited at a time:
    // concurrent waits on the time-skipping server can leave its time skipping locked for the tests after.
    const checks = await Promise.all(
      [1, 2].map(() => env.client.workflow.start('gasStationCheckWorkflow', { taskQueue, workflowId: `gas-station-check-${randomUUID()}`, args: [{ organizationId: org.organizationId }] })),
    );
    assert.equal(await env.client.workflow.getHandle(`transaction-${spend.body.id}`).result(), 'confirmed');
    for (const check of checks) await check.result();

    await eventually(async () => ((await sendsFrom(station.refill_from_wallet_id)).some((send) => send.status === 'broadcast') ? true : undefined), 'the refill broadcast');
    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    assert.equal(await env.client.workflow.getHandle(gasStationRefillWorkflowId(station.id)).result(), 'refilled');
    assert.deepEqual(await runCheck(), { armed: 0 }, 'refilled above the threshold: nothing more to do');
    assert.equal((await sendsFrom(station.refill_from_wallet_id)).length, refillsBefore + 1, 'exactly one refill for the spend, the deposits and both checks');
    const spent = await (await testOrm()).em.fork().findOneOrFail(OutgoingTransaction, { id: spend.body.id });
    const after = await call('GET', `/v1/gas-stations/${station.id}`);
    assert.equal(after.body.balance, (BigInt(station.balance) - spendAmount - BigInt(spent.fee!) + 2n * deposit + BigInt(station.refill_amount_raw)).toString());
  });

  it('a refill that cannot be sent is retried by the policy (3 attempts, 1 and 5 minutes apart) and then reported', async () => {
    const env = await timeSkippingTemporal();
    const empty = await fundedWallet(0n);
    const created = await call('POST', '/v1/gas-stations', { name: 'SOL-less', chain: 'ethereum', threshold: '1', auto_refill_enabled: true, refill_amount: '2', refill_from_wallet_id: empty });
    assert.equal(created.status, 409, 'one station per chain: the first test made the ethereum one');
    const stationId = (await call('GET', '/v1/gas-stations')).body.data[0].id as string;
    const lowBefore = (await stationEvents(stationId)).filter((event) => event.type === 'gas_station.low_balance').length;
    const patched = await call('PATCH', `/v1/gas-stations/${stationId}`, { threshold: '1', refill_amount: '2', refill_from_wallet_id: empty });
    assert.equal(patched.status, 200, patched.text);
    const handle = env.client.workflow.getHandle(gasStationRefillWorkflowId(stationId));
    assert.equal(await handle.result(), 'failed');

    const history = await handle.fetchHistory();
    const submits = (history.events ?? []).filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'submitGasStationRefill');
    assert.equal(submits.length, 3, 'three attempts');
    const timers = (history.events ?? []).flatMap((event) => (event.timerStartedEventAttributes ? [Number(event.timerStartedEventAttributes.startToFireTimeout?.seconds)] : []));
    assert.deepEqual(timers, [60, 300]);
    assert.equal((await sendsFrom(empty)).length, 0, 'nothing was sent');

    const failed = (await stationEvents(stationId)).filter((event) => event.type === 'gas_station.refill_failed');
    assert.equal(failed.length, 1);
    assert.deepEqual({ ...(failed[0]!.data.failure as Record<string, unknown>), message: undefined }, { attempts: 3, code: 'insufficient_funds', message: undefined });
    assert.equal((await stationEvents(stationId)).filter((event) => event.type === 'gas_station.low_balance').length, lowBefore + 1, 'one low_balance per refill run');
    assert.deepEqual(await runCheck(), { armed: 0 }, 'the periodic check leaves a station whose refill was reported failed alone for an hour');
  });

  it('a refill send that stays unconfirmed past a run\'s checks is followed by the next run (continue-as-new) and settles once', async () => {
    const env = await timeSkippingTemporal();
    const stationId = (await call('GET', '/v1/gas-stations')).body.data[0].id as string;
    const source = await fundedWallet(ETHER);
    const eventsBefore = (await stationEvents(stationId)).length;
    const patched = await call('PATCH', `/v1/gas-stations/${stationId}`, { threshold: '1', refill_amount: '0.1', refill_from_wallet_id: source });
    assert.equal(patched.status, 200, patched.text);
    await eventually(async () => ((await sendsFrom(source))[0]?.status === 'broadcast' ? true : undefined), 'the refill broadcast');
    const handle = env.client.workflow.getHandle(gasStationRefillWorkflowId(stationId));
    const firstRunId = (await handle.describe()).runId;

    // No block is mined for an hour: 30 checks 10 s apart, then one a minute, fill more than the first run.
    await env.sleep('60 minutes');
    const first = env.client.workflow.getHandle(handle.workflowId, firstRunId);
    assert.equal((await first.describe()).status.name, 'CONTINUED_AS_NEW');
    const firstEvents = (await first.fetchHistory()).events ?? [];
    assert.ok(firstEvents.length >= HISTORY_EVENTS_PER_RUN && firstEvents.length < HISTORY_EVENTS_PER_RUN + 15, `${firstEvents.length} events in the first run`);
    await recordHistoryIfAsked(first, 'refill-gas-station-continued');

    await mineDevnetBlocks((await testOrm()).em.fork(), 'ethereum', 2);
    assert.equal(await handle.result(), 'refilled');
    assert.equal((await sendsFrom(source)).length, 1, 'one send across both runs');
    const events = (await stationEvents(stationId)).slice(eventsBefore).map((event) => event.type);
    assert.deepEqual(events, ['gas_station.low_balance', 'gas_station.refilled'], 'announced once, by the first run');
  });

  it('replays the recorded refill and check histories with the current workflow code', async () => {
    const bundle = await workflowBundle();
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('refill-gas-station'), 'refill-gas-station');
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('refill-gas-station-continued'), 'refill-gas-station-continued');
    await Worker.runReplayHistory({ workflowBundle: bundle }, await loadHistory('gas-station-check'), 'gas-station-check');
  });
});
