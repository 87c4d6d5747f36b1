import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import type { ServiceWorkers } from '../../src/worker-setup';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { Sponsorship } from '../../src/gas-stations/entities';
import { sponsorshipFlow } from '../../src/gas-stations/flows/sponsorship';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { workflowBundle } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { releaseTimeSkippingTemporal, testOrm, timeSkippingTemporal } from '../support/environment';
import { creditCustodyWallet } from '../support/ledger';
import { eventually } from '../support/eventually';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { mineAndScan, scanDevnet } from '../support/scanning';
import { createTestWorker, NO_SEARCH_ATTRIBUTES } from '../support/worker';

const ETHER = 10n ** 18n;
const USDC = 10n ** 6n;
const RECIPIENT = '0x000000000000000000000000000000000000dEaD';

describe('fundSponsorshipWorkflow (time-skipping, the Ethereum devnet)', () => {
  let app: TestApp;
  let worker: ServiceWorkers;
  let running: Promise<void>;
  const taskQueue = `sponsorship-${randomUUID()}`;
  const config = { ...NO_SEARCH_ATTRIBUTES, TEMPORAL_TASK_QUEUE: taskQueue, CHAIN_CONFIRMATIONS_ETHEREUM: '2', DEVNET_BLOCK_INTERVAL_SECONDS: '3600' };

  before(async () => {
    const env = await timeSkippingTemporal();
    app = await startTestApp({ config, temporal: env });
    ({ worker } = await createTestWorker(env, taskQueue, config));
    running = worker.run();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await app?.close();
    await releaseTimeSkippingTemporal();
  });

  const em = async () => (await testOrm()).em.fork();
  /** Mines blocks and scans them (no scanner workflow runs here): the ledger follows the chain as in the service. */
  const mine = (count: number) => mineAndScan(app, 'ethereum', count);
  /** Puts `amount` of `assetId` on the devnet at `address`, credited to its wallet's ledger by scanning (at its confirmation count). */
  async function credit(address: string, assetId: string, amount: bigint) {
    await fundFromFaucet(await em(), 'ethereum', { to: address, assetId, amount });
    await mine(2);
  }
  /** An organization with an Ethereum gas station and a wallet holding only USDC. */
  async function setUp(name: string, stationOnChain: boolean) {
    const org = await createTestOrganization(name);
    const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
    const station = (await call('POST', '/v1/gas-stations', { name: 'ETH gas', chain: 'ethereum', threshold: '0' })).body;
    if (stationOnChain) await credit(station.address, 'ETH', ETHER);
    else await creditCustodyWallet(await em(), station.wallet_id, 'ETH', ETHER);
    const vault = await call('POST', '/v1/vaults', { name: 'Senders' });
    const sender = (await call('POST', '/v1/wallets', { name: 'USDC only', chain: 'ethereum', vault_id: vault.body.id })).body;
    await credit(sender.primary_address.address, 'USDC_ETH', 100n * USDC);
    return { org, call, station, sender: { id: sender.id as string, address: sender.primary_address.address as string } };
  }
  const transaction = async (id: string) => (await em()).findOneOrFail(OutgoingTransaction, { id });

  it("sends the fuel first and starts the sponsored send only once the fuel is confirmed and on the sender's books: the sender pays exactly the fuel", async () => {
    const env = await timeSkippingTemporal();
    const { call, station, sender } = await setUp('Sponsored, time-skipping', true);
    const sent = await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: RECIPIENT, amount: '10', asset: 'USDC_ETH', sponsor: true });
    assert.equal(sent.status, 201, sent.text);
    const sponsorship = await (await em()).findOneOrFail(Sponsorship, { id: sent.body.sponsorship_id }, { populate: ['fuelTransaction'] });
    const fuelId = sponsorship.fuelTransaction.id;
    assert.equal(sponsorship.fuelAmount, sent.body.fee_limit_raw, 'the fuel is the fee the send is signed to pay');

    await eventually(async () => ((await transaction(fuelId)).status === 'broadcast' ? true : undefined), 'the fuel broadcast');
    assert.equal((await transaction(sent.body.id)).status, 'pending', 'the sponsored send waits, unsigned, for its fuel');

    // The fuel mined at its confirmation count is confirmed by its own workflow; until scanning credits it to the sender, the
    // sponsored send waits: its fee, debited from the sender when it settles, must never find the sender's books without the fuel.
    await mineDevnetBlocks(await em(), 'ethereum', 2);
    await eventually(async () => ((await transaction(fuelId)).status === 'confirmed' ? true : undefined), 'the fuel confirmed');
    await env.sleep('10 seconds');
    assert.equal((await (await em()).findOneOrFail(Sponsorship, { id: sponsorship.id })).status, 'funding', "the fuel is not on the sender's books yet");
    assert.equal((await transaction(sent.body.id)).status, 'pending');
    await scanDevnet(app, 'ethereum');
    const handle = env.client.workflow.getHandle(sponsorshipFlow.workflowId({ sponsorshipId: sponsorship.id }));
    assert.equal(await handle.result(), 'funded');

    await eventually(async () => ((await transaction(sent.body.id)).status === 'broadcast' ? true : undefined), 'the sponsored send broadcast');
    await mine(2);
    assert.equal(await env.client.workflow.getHandle(`transaction-${sent.body.id}`).result(), 'confirmed');
    const settled = await transaction(sent.body.id);
    assert.equal(settled.fee, sponsorship.fuelAmount, 'the send paid exactly the fuel');
    const provider = await app.deps.chains.provider('ethereum', 'sandbox');
    assert.equal(await provider.balance(sender.address, 'ETH'), 0n, "the sender's ether ends where it began");
    const senderLedger = (await call('GET', `/v1/wallets/${sender.id}/balances`)).body.data.find((row: { asset_id: string }) => row.asset_id === 'ETH');
    assert.equal(senderLedger.balance, '0', "on the sender's books too: the fuel credited, the fee debited");
    const charged = await (await em()).findOneOrFail(Sponsorship, { id: sponsorship.id });
    const fuel = await transaction(fuelId);
    assert.equal(charged.budgetCharge, (BigInt(fuel.amount) + BigInt(fuel.fee!)).toString(), 'the budget is charged what the fuel really cost');
    assert.equal(BigInt((await call('GET', `/v1/gas-stations/${station.id}`)).body.balance), ETHER - BigInt(fuel.amount) - BigInt(fuel.fee!));
    await recordHistoryIfAsked(handle, 'fund-sponsorship');
  });

  it('a fuel send that never reaches the chain fails the sponsorship and the sponsored send, releasing its lock', async () => {
    const env = await timeSkippingTemporal();
    // The station's ledger says it holds ether; the chain says it holds none: the node refuses its fuel send.
    const { call, sender } = await setUp('Sponsored, fuel refused', false);
    const sent = await call('POST', '/v1/transactions', { wallet_id: sender.id, to_address: RECIPIENT, amount: '10', asset: 'USDC_ETH', sponsor: true });
    assert.equal(sent.status, 201, sent.text);
    const locked = async () => (await call('GET', `/v1/wallets/${sender.id}/balances`)).body.data.find((row: { asset_id: string }) => row.asset_id === 'USDC_ETH').locked as string;
    assert.equal(await locked(), (10n * USDC).toString());

    const handle = env.client.workflow.getHandle(sponsorshipFlow.workflowId({ sponsorshipId: sent.body.sponsorship_id }));
    assert.equal(await handle.result(), 'failed');
    const failed = await transaction(sent.body.id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.failureReason, 'fuel_failed');
    assert.equal(failed.signedTransaction ?? null, null, 'never signed');
    assert.equal(await locked(), '0', 'its lock released');
    const sponsorship = await (await em()).findOneOrFail(Sponsorship, { id: sent.body.sponsorship_id });
    assert.equal(sponsorship.status, 'failed');
    assert.equal(sponsorship.budgetCharge, '0', 'a fuel that never reached the chain charges the budget nothing');
  });

  it('replays the recorded sponsorship history with the current workflow code', async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('fund-sponsorship'), 'fund-sponsorship');
  });

  it("replays the recorded history of a sponsor-broadcast (the client's bytes broadcast and followed to confirmation, recorded on anvil) with the current workflow code", async () => {
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory('fund-sponsorship-broadcast'), 'fund-sponsorship-broadcast');
  });
});
