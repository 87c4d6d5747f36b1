import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { erc20Abi, parseEther, parseUnits, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ChainNodes } from '../../src/chains/nodes';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { ANVIL_ACCOUNT, anvilFunder, anvilSandboxConfig, deployAnvilToken, startAnvil, type Anvil, anvilHeight } from '../support/anvil';
import { type TestApp, type TestOrganization } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';
import { WebhookReceiver } from '../support/webhook-receiver';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 3;

describe('Deposits from a real Ethereum node (anvil): scanning, confirmations, events, reorganisations', () => {
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  let token: Hex;
  const receiver = new WebhookReceiver();
  const watcher = new WebhookReceiver();
  const config: Record<string, string> = {};

  const wallet = () => anvilFunder(anvil);
  const mine = (blocks: number) => anvil.call('anvil_mine', [`0x${blocks.toString(16)}`]);

  before(async () => {
    anvil = await startAnvil();
    // Block 1 deploys the token: 1,000,000 USDC (6 decimals) to the funder.
    token = await deployAnvilToken(anvil);
    await Promise.all([receiver.start(), watcher.start()]);
    const taskQueue = `anvil-deposits-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, CONFIRMATIONS));
    service = await startScannedService('ethereum', 'Anvil deposits', config, () => anvilHeight(anvil));
    ({ app, org } = service);
  });

  after(async () => {
    await service?.stop();
    await Promise.all([receiver.close(), watcher.close()]);
    await anvil?.stop();
  });

  async function createWallet(name: string) {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name } });
    const created = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name, chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' } });
    assert.equal(created.status, 201, created.text);
    return { id: created.body.id as string, address: created.body.primary_address.address as Hex };
  }

  async function balancesOf(walletId: string) {
    const response = await app.request('GET', `/v1/wallets/${walletId}/balances`, { key: org.secret });
    return Object.fromEntries((response.body.data as { asset_id: string; balance: string; pending: string }[]).map((row) => [row.asset_id, { balance: row.balance, pending: row.pending }]));
  }

  const eventsAt = (target: WebhookReceiver) => target.attempts.map((attempt) => JSON.parse(attempt.body) as { event_id?: string; type: string; data: Record<string, unknown> });

  it('credits ETH and an ERC-20 sent from an anvil account: pending at once, available after the confirmations, events to the endpoint and the subscriptions', async () => {
    const ours = await createWallet('Treasury');
    const foreign = privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d').address;
    const endpoint = await app.request('POST', '/v1/webhooks', { key: org.secret, body: { name: 'deposits', url: receiver.url } });
    receiver.secrets = [endpoint.body.signing_secret];
    const watchOurs = await app.request('POST', '/v1/subscriptions', { key: org.secret, body: { address: ours.address.toLowerCase(), chain: 'ethereum', webhook_url: watcher.url } });
    const watchForeign = await app.request('POST', '/v1/subscriptions', { key: org.secret, body: { address: foreign, chain: 'ethereum', webhook_url: watcher.url, event_type: 'incoming_native_tx' } });
    watcher.secrets = [watchOurs.body.signing_secret, watchForeign.body.signing_secret];

    const ethHash = await wallet().sendTransaction({ to: ours.address, value: parseEther('1.5') });
    const usdcHash = await wallet().writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [ours.address, parseUnits('250.5', 6)] });

    const seen = await eventually(async () => {
      const balances = await balancesOf(ours.id);
      return balances.ETH!.pending === parseEther('1.5').toString() && balances.USDC_ETH!.pending === '250500000' ? balances : undefined;
    }, 'both deposits pending');
    assert.equal(seen.ETH!.balance, '0', 'a pending deposit is not yet balance');
    assert.equal(seen.USDC_ETH!.balance, '0');

    const pendingList = await app.request('GET', `/v1/deposits?wallet_id=${ours.id}&status=pending`, { key: org.secret });
    assert.equal(pendingList.status, 200);
    const byAsset = Object.fromEntries((pendingList.body.data as { asset_id: string }[]).map((row) => [row.asset_id, row])) as Record<string, Record<string, unknown>>;
    assert.equal(byAsset.ETH!.tx_hash, ethHash);
    assert.equal(byAsset.ETH!.amount, '1.5');
    assert.equal(byAsset.ETH!.from_address, ANVIL_ACCOUNT);
    assert.equal(byAsset.USDC_ETH!.tx_hash, usdcHash);
    assert.equal(byAsset.USDC_ETH!.amount, '250.5');
    assert.match(byAsset.USDC_ETH!.position as string, /^log:\d+$/);
    assert.equal(byAsset.ETH!.required_confirmations, CONFIRMATIONS);
    // Sent only now: its block would be the ETH deposit's third confirmation, racing the pending reads above.
    await wallet().sendTransaction({ to: foreign, value: parseEther('0.25') });

    await mine(CONFIRMATIONS);
    const credited = await eventually(async () => {
      const balances = await balancesOf(ours.id);
      return balances.ETH!.balance === parseEther('1.5').toString() && balances.USDC_ETH!.balance === '250500000' ? balances : undefined;
    }, 'both deposits confirmed');
    assert.equal(credited.ETH!.pending, '0');
    assert.equal(credited.USDC_ETH!.pending, '0');

    const deposit = await app.request('GET', `/v1/deposits/${byAsset.ETH!.id as string}`, { key: org.secret });
    assert.equal(deposit.body.status, 'confirmed');
    assert.ok(deposit.body.confirmations >= CONFIRMATIONS);

    // The endpoint: our deposits only, pending then confirmed, and the stablecoin deposit event.
    await eventually(async () => (eventsAt(receiver).length >= 5 ? true : undefined), 'five endpoint deliveries');
    const endpointEvents = eventsAt(receiver);
    const summary = (events: ReturnType<typeof eventsAt>) => events.map((event) => `${event.type}:${String(event.data.status ?? '')}:${String(event.data.asset_id)}`).sort();
    assert.deepEqual(summary(endpointEvents), [
      'deposit.success:confirmed:USDC_ETH',
      'incoming_native_tx:confirmed:ETH',
      'incoming_native_tx:pending:ETH',
      'incoming_token_tx:confirmed:USDC_ETH',
      'incoming_token_tx:pending:USDC_ETH',
    ]);
    assert.ok(receiver.attempts.every((attempt) => attempt.verifiedWith[0]), 'every delivery is signed with the endpoint secret');
    const stablecoin = endpointEvents.find((event) => event.type === 'deposit.success')!;
    assert.match(stablecoin.event_id!, /^evt_/, 'the stablecoin deposit event carries a top-level event_id');
    assert.equal(stablecoin.data.amount, '250.5');

    // The subscriptions: everything to our address (lower-case when subscribed), and the foreign address's native transfer.
    await eventually(async () => (eventsAt(watcher).length >= 6 ? true : undefined), 'six subscription deliveries');
    const watched = eventsAt(watcher);
    assert.deepEqual(summary(watched.filter((event) => event.data.to_address === ours.address)), [
      'incoming_native_tx:confirmed:ETH',
      'incoming_native_tx:pending:ETH',
      'incoming_token_tx:confirmed:USDC_ETH',
      'incoming_token_tx:pending:USDC_ETH',
    ]);
    assert.deepEqual(summary(watched.filter((event) => event.data.to_address === foreign)), ['incoming_native_tx:confirmed:ETH', 'incoming_native_tx:pending:ETH']);
    assert.ok(watched.filter((event) => event.data.to_address === foreign).every((event) => event.data.wallet_id === null));
    assert.ok(!endpointEvents.some((event) => event.data.to_address === foreign), 'a watched foreign address is not announced to the endpoints');
    const subscription = await app.request('GET', `/v1/subscriptions/${watchForeign.body.id as string}`, { key: org.secret });
    assert.notEqual(subscription.body.last_event_at, null);

    const foreignDeposits = await app.request('GET', '/v1/deposits', { key: org.secret });
    assert.ok((foreignDeposits.body.data as { to_address: string }[]).every((row) => row.to_address !== foreign), 'a watched address is not a deposit');
  });

  it('removes a deposit from pending when a reorganisation drops its block, and credits it once when the new chain carries it', async () => {
    const ours = await createWallet('Reorg');
    const snapshot = await anvil.call('evm_snapshot');
    await wallet().sendTransaction({ to: ours.address, value: parseEther('2') });
    await eventually(async () => ((await balancesOf(ours.id)).ETH!.pending === parseEther('2').toString() ? true : undefined), 'deposit pending');

    // The block carrying it is abandoned for a longer chain without it.
    await anvil.call('evm_revert', [snapshot]);
    await mine(2);
    const afterReorg = await eventually(async () => {
      const listed = await app.request('GET', `/v1/deposits?wallet_id=${ours.id}`, { key: org.secret });
      return listed.body.data[0]?.status === 'dropped' ? listed.body.data[0] : undefined;
    }, 'deposit dropped');
    assert.equal(afterReorg.block_height, null);
    assert.deepEqual((await balancesOf(ours.id)).ETH, { balance: '0', pending: '0' });

    // Sent again in the new chain: pending once more, then confirmed once.
    await wallet().sendTransaction({ to: ours.address, value: parseEther('2') });
    await mine(CONFIRMATIONS);
    await eventually(async () => ((await balancesOf(ours.id)).ETH!.balance === parseEther('2').toString() ? true : undefined), 'deposit confirmed');
    await mine(2);
    await eventually(async () => {
      const em = (await testOrm()).em.fork();
      const cursor = await em.findOne(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' });
      return cursor && cursor.height === Number(await anvil.call('eth_blockNumber')) ? true : undefined;
    }, 'scanning caught up');
    assert.deepEqual((await balancesOf(ours.id)).ETH, { balance: parseEther('2').toString(), pending: '0' });
  });

  it("keeps the ledger invariant: each wallet's ledger equals what anvil says its addresses hold", async () => {
    const tip = Number(await anvil.call('eth_blockNumber'));
    await eventually(async () => {
      const em = (await testOrm()).em.fork();
      const cursor = await em.findOne(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' });
      return cursor && cursor.height >= tip ? true : undefined;
    }, 'scanning caught up with the tip');
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const provider = await nodes.provider('ethereum', 'sandbox');
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId, assetIds: ['ETH', 'USDC_ETH'] });
    assert.equal(result.wallets, 2);
    assert.deepEqual(result.mismatches, []);
  });
});
