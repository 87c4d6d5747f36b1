import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { encodeFunctionData, erc20Abi, parseEther, parseUnits, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ChainNodes } from '../../src/chains/nodes';
import { OutgoingTransfer } from '../../src/monitoring/entities';
import { chainScanWorkflowId, scanThroughUpdate } from '../../src/monitoring/flows/chain-scan';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { anvilEthBalance, anvilFunder, anvilMine, anvilReceipt, anvilSandboxConfig, anvilTokenBalance, deployAnvilToken, receiptFee, startAnvil, type Anvil, anvilHeight } from '../support/anvil';
import { type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { testLogger } from '../support/secret-scan';
import { WebhookReceiver } from '../support/webhook-receiver';
import { startScannedService, type ScannedService } from '../support/scanned-service';

const CONFIRMATIONS = 2;

interface Delivered {
  type: string;
  data: Record<string, unknown>;
}

/** Transfers out of custody addresses on a real Ethereum node (anvil): scanned, recorded, announced, and debited when the platform did not make them. */
describe('Outgoing transfers on a real Ethereum node (anvil): a spend made outside the platform is debited and announced; a platform send is announced and debited once', () => {
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  let token: Hex;
  const config: Record<string, string> = {};
  const receiver = new WebhookReceiver();
  const watcher = new WebhookReceiver();
  /** Nobody's address. */
  const outside = privateKeyToAccount(generatePrivateKey()).address;

  before(async () => {
    anvil = await startAnvil();
    token = await deployAnvilToken(anvil);
    await Promise.all([receiver.start(), watcher.start()]);
    const taskQueue = `anvil-outgoing-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, CONFIRMATIONS));
    service = await startScannedService('ethereum', 'Anvil outgoing', config, () => anvilHeight(anvil));
    ({ app, org } = service);
  });

  after(async () => {
    await service?.stop();
    await Promise.all([receiver.close(), watcher.close()]);
    await anvil?.stop();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  async function balance(walletId: string, assetId: string) {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string; locked: string; pending: string }[];
    const row = rows.find((candidate) => candidate.asset_id === assetId)!;
    return { balance: BigInt(row.balance), locked: BigInt(row.locked), pending: BigInt(row.pending) };
  }
  async function scanned() {
    const height = Number(await anvil.call('eth_blockNumber'));
    const handle = (await localTemporal()).client.workflow.getHandle(chainScanWorkflowId('ethereum', 'sandbox'));
    const through = await handle.executeUpdate(scanThroughUpdate, { args: [{ height, waitSeconds: 30 }] });
    assert.ok(through.reached, 'scanning reached the tip');
  }
  async function ledgerMatchesChain() {
    await scanned();
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const result = await compareLedgerWithChain((await testOrm()).em.fork(), await nodes.provider('ethereum', 'sandbox'), {
      chain: 'ethereum',
      environment: 'sandbox',
      organizationId: org.organizationId,
      assetIds: ['ETH', 'USDC_ETH'],
    });
    assert.equal(result.wallets, 1);
    assert.deepEqual(result.mismatches, []);
  }
  const delivered = (target: WebhookReceiver, txid: string) =>
    target.attempts.map((attempt) => JSON.parse(attempt.body) as Delivered).filter((event) => event.data.tx_hash === txid);
  const outgoingRows = async (txid: string) => (await testOrm()).em.fork().find(OutgoingTransfer, { txid }, { orderBy: { position: 'asc' } });
  const unexpectedEntries = async (walletId: string) =>
    (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ asset_id: string; balance: string; reference_id: string }[]>(
        `select asset_id, balance::text as balance, reference_id from custody_journal_entries where wallet_id = ? and kind = 'unexpected_spend' order by created_at`,
        [walletId],
      );

  let wallet: { id: string; address: Hex };
  const ETH_FUNDED = parseEther('5');
  const USDC_FUNDED = parseUnits('500', 6);

  it('debits ETH and an ERC-20 the wallet\'s address spent outside the platform (its fees too): ledger = chain, the outgoing events and wallet.unexpected_spend delivered once', async () => {
    const vault = await call('POST', '/v1/vaults', { name: 'Outgoing' });
    const created = await call('POST', '/v1/wallets', { name: 'Outgoing', chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
    assert.equal(created.status, 201, created.text);
    wallet = { id: created.body.id, address: created.body.primary_address.address };
    const endpoint = await call('POST', '/v1/webhooks', { name: 'all', url: receiver.url });
    receiver.secrets = [endpoint.body.signing_secret];
    const subscription = await call('POST', '/v1/subscriptions', { address: wallet.address, chain: 'ethereum', webhook_url: watcher.url, event_type: 'outgoing_token_tx' });
    assert.equal(subscription.status, 201, subscription.text);
    watcher.secrets = [subscription.body.signing_secret];

    await anvilFunder(anvil).sendTransaction({ to: wallet.address, value: ETH_FUNDED });
    await anvilFunder(anvil).writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [wallet.address, USDC_FUNDED] });
    await anvilMine(anvil, CONFIRMATIONS);
    await eventually(async () => ((await balance(wallet.id, 'ETH')).balance === ETH_FUNDED && (await balance(wallet.id, 'USDC_ETH')).balance === USDC_FUNDED ? true : undefined), 'deposits confirmed');

    // The key is used outside the platform: ether and tokens leave the custody address, each paying gas.
    await anvil.call('anvil_impersonateAccount', [wallet.address]);
    const ethHash = (await anvil.call('eth_sendTransaction', [{ from: wallet.address, to: outside, value: `0x${parseEther('1.25').toString(16)}` }])) as Hex;
    const usdcHash = (await anvil.call('eth_sendTransaction', [
      { from: wallet.address, to: token, data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [outside, parseUnits('40', 6)] }) },
    ])) as Hex;
    await anvil.call('anvil_stopImpersonatingAccount', [wallet.address]);
    const ethFee = receiptFee(await anvilReceipt(anvil, ethHash));
    const usdcFee = receiptFee(await anvilReceipt(anvil, usdcHash));
    await ledgerMatchesChain();

    assert.equal((await balance(wallet.id, 'ETH')).balance, ETH_FUNDED - parseEther('1.25') - ethFee - usdcFee);
    assert.equal((await balance(wallet.id, 'USDC_ETH')).balance, USDC_FUNDED - parseUnits('40', 6));
    assert.equal((await balance(wallet.id, 'ETH')).balance, await anvilEthBalance(anvil, wallet.address));
    assert.equal((await balance(wallet.id, 'USDC_ETH')).balance, await anvilTokenBalance(anvil, token, wallet.address));

    const ethRows = await outgoingRows(ethHash);
    assert.deepEqual(
      ethRows.map((row) => [row.position, row.assetId, row.amount, row.fee, row.unexpected, row.transactionId ?? null, row.toAddress]),
      [['native', 'ETH', parseEther('1.25').toString(), ethFee.toString(), true, null, outside]],
    );
    const usdcRows = await outgoingRows(usdcHash);
    assert.deepEqual(
      usdcRows.map((row) => [row.position.replace(/\d+$/, 'N'), row.assetId, row.amount, row.fee, row.unexpected]),
      [
        ['fee', 'ETH', '0', usdcFee.toString(), true],
        ['log:N', 'USDC_ETH', parseUnits('40', 6).toString(), '0', true],
      ],
      'the token transfer, and its fee on a row of its own',
    );
    const entries = await unexpectedEntries(wallet.id);
    assert.deepEqual(entries.map((entry) => entry.reference_id).sort(), [...ethRows, ...usdcRows].map((row) => row.id).sort(), 'one journal entry per transfer');

    const ethEvents = await eventually(async () => {
      const events = delivered(receiver, ethHash);
      return events.length >= 2 ? events : undefined;
    }, 'the ETH spend announced');
    const usdcEvents = await eventually(async () => {
      const events = delivered(receiver, usdcHash);
      return events.length >= 2 ? events : undefined;
    }, 'the USDC spend announced');
    assert.deepEqual(ethEvents.map((event) => event.type).sort(), ['outgoing_native_tx', 'wallet.unexpected_spend']);
    assert.deepEqual(usdcEvents.map((event) => event.type).sort(), ['outgoing_token_tx', 'wallet.unexpected_spend'], 'no outgoing_native_tx for a fee alone');
    const native = ethEvents.find((event) => event.type === 'outgoing_native_tx')!.data;
    assert.equal(native.object, 'outgoing_transfer');
    assert.equal(native.amount, '1.25');
    assert.equal(native.from_address, wallet.address);
    assert.equal(native.to_address, outside);
    assert.equal(native.unexpected, true);
    assert.equal(native.transaction_id, null);
    const spend = usdcEvents.find((event) => event.type === 'wallet.unexpected_spend')!.data;
    assert.equal(spend.wallet_id, wallet.id);
    assert.deepEqual(
      (spend.debits as { asset_id: string; amount_raw: string }[]).map((debit) => [debit.asset_id, debit.amount_raw]).sort(),
      [
        ['ETH', usdcFee.toString()],
        ['USDC_ETH', parseUnits('40', 6).toString()],
      ],
    );
    const watched = await eventually(async () => (delivered(watcher, usdcHash).length ? delivered(watcher, usdcHash) : undefined), 'the subscription told');
    assert.deepEqual(
      watched.map((event) => event.type),
      ['outgoing_token_tx'],
      'the subscription watching the address, by its filter',
    );
    assert.ok(receiver.attempts.every((attempt) => attempt.verifiedWith[0]));
  });

  it('a platform send is recorded as the platform\'s, announced once and debited once (by its settlement, not by scanning)', async () => {
    const before = await balance(wallet.id, 'ETH');
    const entriesBefore = (await unexpectedEntries(wallet.id)).length;
    const created = await call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outside, amount: '0.5', asset: 'ETH' });
    assert.equal(created.status, 201, created.text);
    const hash = await eventually(async () => {
      const read = (await call('GET', `/v1/transactions/${created.body.id}`)).body as { status: string; tx_hash: string | null };
      return read.status === 'broadcast' || read.status === 'confirming' ? read.tx_hash! : undefined;
    }, 'the send broadcast');
    // Scanning sees the mined send before its workflow settles it: recorded, not debited.
    await scanned();
    const [row, ...others] = await outgoingRows(hash);
    assert.equal(others.length, 0);
    assert.equal(row!.transactionId, created.body.id);
    assert.equal(row!.unexpected, false);
    assert.equal((await balance(wallet.id, 'ETH')).balance, before.balance, 'not debited by scanning');

    await anvilMine(anvil, CONFIRMATIONS);
    const settled = await eventually(async () => {
      const read = (await call('GET', `/v1/transactions/${created.body.id}`)).body as { status: string; fee_raw: string };
      return read.status === 'confirmed' ? read : undefined;
    }, 'the send settled');
    await ledgerMatchesChain();
    assert.equal((await balance(wallet.id, 'ETH')).balance, before.balance - parseEther('0.5') - BigInt(settled.fee_raw), 'debited once');
    assert.equal((await unexpectedEntries(wallet.id)).length, entriesBefore, 'no unexpected_spend entry');

    const events = await eventually(async () => (delivered(receiver, hash).some((event) => event.type === 'outgoing_native_tx') ? delivered(receiver, hash) : undefined), 'the send announced');
    const outgoing = events.filter((event) => event.type === 'outgoing_native_tx');
    assert.equal(outgoing.length, 1);
    assert.equal(outgoing[0]!.data.transaction_id, created.body.id);
    assert.equal(outgoing[0]!.data.unexpected, false);
    assert.equal(outgoing[0]!.data.fee_raw, settled.fee_raw);
    assert.equal(events.filter((event) => event.type === 'wallet.unexpected_spend').length, 0);
  });
});
