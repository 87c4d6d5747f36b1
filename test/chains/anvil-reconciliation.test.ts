import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { erc20Abi, parseEther, parseUnits, toHex, type Hex } from 'viem';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { anvilFunder, anvilHeight, anvilSandboxConfig, deployAnvilMulticall3, deployAnvilToken, startAnvil, type Anvil } from '../support/anvil';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { creditCustodyWallet } from '../support/ledger';
import { createHotWallet, driftEventsOf, organizationDrifts, startReconciliationPass, walletBalances } from '../support/reconciliation';
import { startScannedService, type ScannedService } from '../support/scanned-service';
import { WebhookReceiver } from '../support/webhook-receiver';

const CONFIRMATIONS = 2;
/** anvil mines a block this often while a test says so: the tip always moves while a pass reads. */
const BLOCK_EVERY_MS = 200;

/** The ledger reconciliation against a real Ethereum node (anvil) that never stops mining, a page per holder. */
describe('Ledger reconciliation on anvil: at the scanner\'s block, under constant block production, page after page', () => {
  let anvil: Anvil;
  let service: ScannedService;
  let token: Hex;
  const receiver = new WebhookReceiver();
  const config: Record<string, string> = {};
  let mining: NodeJS.Timeout | undefined;

  before(async () => {
    anvil = await startAnvil();
    token = await deployAnvilToken(anvil);
    await deployAnvilMulticall3(anvil);
    await receiver.start();
    const taskQueue = `anvil-reconciliation-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, CONFIRMATIONS), { LEDGER_RECONCILIATION_HOLDERS_PER_PAGE: '1', CHAIN_SCAN_INTERVAL_SECONDS: '0.5' });
    service = await startScannedService('ethereum', 'Anvil reconciliation', config, () => anvilHeight(anvil));
    const endpoint = await service.call('POST', '/v1/webhooks', { name: 'drifts', url: receiver.url, event_types: ['ledger.drift'] });
    receiver.secrets = [endpoint.body.signing_secret];
  });

  after(async () => {
    clearInterval(mining);
    await service?.stop();
    await receiver.close();
    await anvil?.stop();
  });

  const createWallet = async (name: string) => {
    const created = await createHotWallet(service, name, 'ethereum');
    return { ...created, address: created.address as Hex };
  };
  const balances = (walletId: string) => walletBalances(service, walletId);
  const startPass = () => startReconciliationPass({ chain: 'ethereum', environment: 'sandbox', organizationId: service.org.organizationId }, config.TEMPORAL_TASK_QUEUE!);
  const pass = async () => (await (await startPass()).result()) as { compared: number; skipped?: string };
  const drifts = () => organizationDrifts(service.org.organizationId);
  const driftEvents = () => driftEventsOf(receiver);
  const scannerHeight = async () => (await (await testOrm()).em.fork().findOne(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' }))?.height ?? 0;
  const scannerPast = (height: number, what: string) => eventually(async () => ((await scannerHeight()) > height ? true : undefined), what);

  it('confirms planted drifts within two passes while a block is mined every 200 ms and a busy address keeps receiving; resolves them once corrected', async () => {
    const planted = await createWallet('Planted');
    const busy = await createWallet('Busy');
    const surplus = await createWallet('Contract deposits');
    const funder = anvilFunder(anvil);
    await funder.sendTransaction({ to: planted.address, value: parseEther('2') });
    await funder.writeContract({ address: token, abi: erc20Abi, functionName: 'transfer', args: [planted.address, parseUnits('100', 6)] });
    await anvil.call('anvil_mine', [toHex(CONFIRMATIONS)]);
    await eventually(async () => ((await balances(planted.id)).USDC_ETH === parseUnits('100', 6) && (await balances(planted.id)).ETH === parseEther('2') ? true : undefined), 'the deposits credited');

    mining = setInterval(() => void anvil.call('evm_mine').catch(() => undefined), BLOCK_EVERY_MS);
    // The busy address is paid every few blocks, so its deposits are always being mined, pending or confirmed while passes read.
    let paying = true;
    const payments = (async () => {
      while (paying) {
        await funder.sendTransaction({ to: busy.address, value: parseEther('0.01') }).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 3 * BLOCK_EVERY_MS));
      }
    })();
    try {
      const em = (await testOrm()).em.fork();
      // The ledger ahead of the chain (ETH and the token), a lock no send holds, and ether no transaction the scanner reads brought.
      await creditCustodyWallet(em, planted.id, 'ETH', parseEther('0.3'));
      await creditCustodyWallet(em, planted.id, 'USDC_ETH', parseUnits('7', 6), { locked: parseUnits('7', 6) });
      await anvil.call('anvil_setBalance', [surplus.address, toHex(parseEther('0.5'))]);
      // A pass compares at the scanner's block: the passes counted are those after the scanner read past the plants.
      const plantedAt = await anvilHeight(anvil);
      await scannerPast(plantedAt, 'the scanner past the plants');

      const expected = [
        { wallet_id: planted.id, asset_id: 'ETH', figure: 'balance', status: 'open' },
        { wallet_id: planted.id, asset_id: 'USDC_ETH', figure: 'balance', status: 'open', ledger_amount: parseUnits('107', 6).toString(), chain_amount: parseUnits('100', 6).toString() },
        { wallet_id: planted.id, asset_id: 'USDC_ETH', figure: 'locked', status: 'open', ledger_amount: parseUnits('7', 6).toString(), chain_amount: '0' },
        { wallet_id: surplus.id, asset_id: 'ETH', figure: 'balance', status: 'credited', ledger_amount: '0', chain_amount: parseEther('0.5').toString() },
      ].sort((a, b) => (`${a.wallet_id} ${a.asset_id} ${a.figure}` < `${b.wallet_id} ${b.asset_id} ${b.figure}` ? -1 : 1));
      // A send of the platform's in flight while the passes read: locked, then mined (and not yet settled), then settled.
      const sent = await service.call('POST', '/v1/transactions', { wallet_id: planted.id, to_address: '0x1111111111111111111111111111111111111111', amount: '0.5', asset: 'ETH' });
      assert.equal(sent.status, 201, sent.text);
      const heightBefore = await anvilHeight(anvil);
      // A surplus is final once the scanner's block is CONFIRMATIONS deep past the pass that saw it: on a loaded
      // machine the scanner may not move between two quick passes, so the next pass waits until it has.
      let lastPassAt = 0;
      for (let passes = 1; ; passes++) {
        if (passes > 1) await scannerPast(lastPassAt + CONFIRMATIONS - 2, 'the scanner past the last pass');
        const result = await pass();
        lastPassAt = await scannerHeight();
        assert.equal(result.skipped, undefined, 'a node read at the block never waits for the scanner');
        assert.equal(result.compared, 3, 'every address of the organization compared');
        // The planted ETH drift's figures move with the send (mined, then settled): only its difference is fixed.
        const found = (await drifts()).map((drift) =>
          drift.asset_id === 'ETH' && drift.figure === 'balance' && drift.wallet_id === planted.id
            ? (assert.equal(BigInt(drift.ledger_amount) - BigInt(drift.chain_amount), parseEther('0.3')), { wallet_id: drift.wallet_id, asset_id: drift.asset_id, figure: drift.figure, status: drift.status })
            : drift,
        );
        if (JSON.stringify(found) === JSON.stringify(expected)) break;
        assert.ok(passes < 2, `two passes confirm the planted drifts and nothing else: ${JSON.stringify(await drifts())}`);
      }
      assert.ok((await anvilHeight(anvil)) > heightBefore + 3, 'blocks were mined while the passes read');
      assert.equal((await balances(surplus.id)).ETH, parseEther('0.5'), 'the unattributed deposit credited once final');
      // A ledger.drift per drift when opened, and the surplus's again when it was credited (once final).
      await eventually(async () => (driftEvents().length === 5 ? true : undefined), 'a ledger.drift per drift and per credit');
      assert.deepEqual(driftEvents().map((event) => `${event.data.asset_id}:${event.data.figure}:${event.data.status}`).sort(), [
        'ETH:balance:credited',
        'ETH:balance:open',
        'ETH:balance:open',
        'USDC_ETH:balance:open',
        'USDC_ETH:locked:open',
      ]);

      const settled = await eventually(async () => {
        const read = (await service.call('GET', `/v1/transactions/${sent.body.id}`)).body as { status: string; fee: string | null };
        return read.status === 'confirmed' ? read : undefined;
      }, 'the send settled');
      // Corrected by hand: the next pass finds every figure agreeing, the settled send's and the busy address's included.
      await creditCustodyWallet(em, planted.id, 'ETH', -parseEther('0.3'));
      await creditCustodyWallet(em, planted.id, 'USDC_ETH', -parseUnits('7', 6), { locked: -parseUnits('7', 6) });
      await pass();
      assert.deepEqual((await drifts()).map((drift) => drift.status).sort(), ['credited', 'resolved', 'resolved', 'resolved']);
      assert.ok(settled.fee, 'the send paid its fee');
    } finally {
      paying = false;
      await payments;
      clearInterval(mining);
    }
  });

  it('completes a pass of more than 100 pages, and a pass stopped half way resumes where it stopped', async () => {
    const many = await createWallet('Many addresses');
    for (let index = 0; index < 100; index++) assert.equal((await service.call('POST', `/v1/wallets/${many.id}/addresses`, {})).status, 201);
    const holders = 3 + 101;

    const whole = await startPass();
    assert.deepEqual(await whole.result(), { compared: holders });

    const orm = await testOrm();
    const passRow = () =>
      orm.em
        .fork()
        .execute<{ cursor: string | null; holders_compared: number; last_holders_compared: number | null }[]>(
          `select cursor, holders_compared, last_holders_compared from ledger_reconciliation_passes where chain = 'ethereum' and environment = 'sandbox' and scope = ?`,
          [service.org.organizationId],
        )
        .then((rows) => rows[0]!);
    assert.deepEqual(await passRow(), { cursor: null, holders_compared: 0, last_holders_compared: holders });

    const stopped = await startPass();
    await eventually(async () => ((await passRow()).holders_compared >= 30 ? true : undefined), 'the pass half way', 60_000, 50);
    await stopped.terminate('stopped half way');
    const resumed = await pass();
    assert.ok(resumed.compared < holders - 25, `the next pass resumed at the stored cursor: ${resumed.compared}`);
    assert.deepEqual(await passRow(), { cursor: null, holders_compared: 0, last_holders_compared: holders }, 'each holder counted once over both runs');
    assert.deepEqual(
      (await drifts()).filter((drift) => drift.status === 'open'),
      [],
      'nothing differs',
    );
  });
});
