import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { mnemonicToSeedSync } from '@scure/bip39';
import type { SolanaRpcProvider } from '../../src/chains/providers/solana-rpc';
import { signTransfer } from '../../src/chains/transfers';
import { associatedTokenAccount, LAMPORTS_PER_SIGNATURE } from '../../src/chains/transfers/solana';
import { coinTypeFor, deriveKey } from '../../src/keys/derivation';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { ledgerViewAt } from '../../src/monitoring/ledger-check';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { creditCustodyWallet } from '../support/ledger';
import { mintData, putTokenProgramAccount, svmAddress, tokenAccountData } from '../support/litesvm';
import { createHotWallet, driftEventsOf, organizationDrifts, startReconciliationPass, walletBalances } from '../support/reconciliation';
import type { ScannedService } from '../support/scanned-service';
import { SolanaNode } from '../support/solana-node';
import { SLOT_EVERY_MS, startSolanaService } from '../support/solana-service';
import { WebhookReceiver } from '../support/webhook-receiver';

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;
const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const funder = deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: randomInt(1, 2 ** 30), index: 0 });

/**
 * The ledger reconciliation of Solana through the real scanner, Temporal, PostgreSQL and webhooks,
 * against LiteSVM behind a local Solana JSON-RPC (test/support/solana-node.ts) that seals a slot every
 * 400 ms: each page reads its holders' accounts at the node's confirmed slot and compares them with the
 * scanner's view at that slot. Deposits are real transactions the runtime executed and the scanner read.
 */
describe('Ledger reconciliation on Solana (LiteSVM): at the slot the node read, while a slot passes every 400 ms', () => {
  const node = new SolanaNode();
  let service: ScannedService;
  let provider: SolanaRpcProvider;
  let mint: string;
  const receiver = new WebhookReceiver();
  const config: Record<string, string> = {};

  before(async () => {
    mint = deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: 1, index: randomInt(2 ** 30) }).address;
    putTokenProgramAccount(node.svm, mint, mintData(funder.address, 1_000_000n * USDC, 6));
    putTokenProgramAccount(node.svm, associatedTokenAccount(funder.address, mint), tokenAccountData(mint, funder.address, 1_000_000n * USDC));
    node.svm.airdrop(svmAddress(funder.address), (1_000n * SOL) as never);
    await receiver.start();
    const started = await startSolanaService(node, 'Solana reconciliation', mint, { LEDGER_RECONCILIATION_HOLDERS_PER_PAGE: '1' });
    ({ service, provider } = started);
    Object.assign(config, started.config);
    const endpoint = await service.call('POST', '/v1/webhooks', { name: 'drifts', url: receiver.url, event_types: ['ledger.drift'] });
    receiver.secrets = [endpoint.body.signing_secret];
  });

  after(async () => {
    await service?.stop();
    await receiver.close();
    await node.stop();
  });

  const createWallet = (name: string) => createHotWallet(service, name, 'solana');
  /** A transfer from the funder the runtime executes, in a block the scanner reads. */
  const pay = async (to: string, assetId: 'SOL' | 'USDC_SOL', amount: bigint) => {
    const signed = signTransfer(
      {
        chain: 'solana',
        testnet: false,
        from: funder.address,
        to,
        assetId,
        amount,
        ...(assetId === 'USDC_SOL' ? { tokenAddress: mint } : {}),
        fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE },
        recentBlock: await provider.recentBlock(),
        reference: `tx_${randomInt(2 ** 40)}`,
      },
      [funder],
    );
    await provider.broadcast(signed.raw);
  };
  const balances = (walletId: string) => walletBalances(service, walletId);
  const pass = async () => (await (await startReconciliationPass({ chain: 'solana', environment: 'sandbox', organizationId: service.org.organizationId }, config.TEMPORAL_TASK_QUEUE!)).result()) as { compared: number; skipped?: string };
  const scanned = async () => (await (await testOrm()).em.fork().findOneOrFail(ChainScanCursor, { chain: 'solana', environment: 'sandbox' })).height;
  const drifts = () => organizationDrifts(service.org.organizationId);
  const driftEvents = () => driftEventsOf(receiver);

  it('compares SOL and USDC_SOL of every address at one slot: nothing where the ledger is the runtime, planted drifts within two passes, a busy address never', async () => {
    const quiet = await createWallet('Quiet');
    const planted = await createWallet('Planted');
    const busy = await createWallet('Busy');
    const surplus = await createWallet('Surplus');
    await pay(quiet.address, 'SOL', 2n * SOL);
    await pay(quiet.address, 'USDC_SOL', 50n * USDC);
    await pay(planted.address, 'SOL', SOL);
    await pay(planted.address, 'USDC_SOL', 100n * USDC);
    await eventually(async () => {
      const [a, b] = [await balances(quiet.id), await balances(planted.id)];
      return a.SOL === 2n * SOL && a.USDC_SOL === 50n * USDC && b.SOL === SOL && b.USDC_SOL === 100n * USDC ? true : undefined;
    }, 'the deposits credited');

    // The busy address is paid every other slot, so its deposits are always being mined, pending or confirmed while passes read.
    let paying = true;
    const payments = (async () => {
      for (let lamports = 10_000_000n; paying; lamports += 1n) {
        await pay(busy.address, 'SOL', lamports);
        await new Promise((resolve) => setTimeout(resolve, 2 * SLOT_EVERY_MS));
      }
    })();
    try {
      const em = (await testOrm()).em.fork();
      // The ledger ahead of the runtime (SOL and the token), a lock no send holds, and lamports no transaction the scanner reads brought.
      await creditCustodyWallet(em, planted.id, 'SOL', (3n * SOL) / 10n);
      await creditCustodyWallet(em, planted.id, 'USDC_SOL', 7n * USDC, { locked: 7n * USDC });
      node.svm.airdrop(svmAddress(surplus.address), (SOL / 2n) as never);
      const plantedAt = node.slot;
      await eventually(async () => ((await scanned()) > plantedAt ? true : undefined), 'the scanner past the plants');

      const expected = [
        { wallet_id: planted.id, asset_id: 'SOL', figure: 'balance', status: 'open', ledger_amount: ((13n * SOL) / 10n).toString(), chain_amount: SOL.toString() },
        { wallet_id: planted.id, asset_id: 'USDC_SOL', figure: 'balance', status: 'open', ledger_amount: (107n * USDC).toString(), chain_amount: (100n * USDC).toString() },
        { wallet_id: planted.id, asset_id: 'USDC_SOL', figure: 'locked', status: 'open', ledger_amount: (7n * USDC).toString(), chain_amount: '0' },
        { wallet_id: surplus.id, asset_id: 'SOL', figure: 'balance', status: 'credited', ledger_amount: '0', chain_amount: (SOL / 2n).toString() },
      ].sort((a, b) => (`${a.wallet_id} ${a.asset_id} ${a.figure}` < `${b.wallet_id} ${b.asset_id} ${b.figure}` ? -1 : 1));
      const slotBefore = node.slot;
      for (let passes = 1; ; passes++) {
        const result = await pass();
        assert.deepEqual(result, { compared: 4 }, 'every address of the organization compared, none waiting for a scanner that never matches the tip');
        if (JSON.stringify(await drifts()) === JSON.stringify(expected)) break;
        assert.ok(passes < 2, `two passes confirm the planted drifts and nothing else: ${JSON.stringify(await drifts())}`);
      }
      assert.ok(node.slot > slotBefore + 3, 'slots passed while the passes read');
      assert.equal((await balances(surplus.id)).SOL, SOL / 2n, 'the unattributed deposit credited once final');
      // A ledger.drift per drift when opened, and the surplus's again when it was credited (once final).
      await eventually(async () => (driftEvents().length === 5 ? true : undefined), 'a ledger.drift per drift and per credit');
      assert.deepEqual(driftEvents().map((event) => `${event.data.asset_id}:${event.data.figure}:${event.data.status}`).sort(), [
        'SOL:balance:credited',
        'SOL:balance:open',
        'SOL:balance:open',
        'USDC_SOL:balance:open',
        'USDC_SOL:locked:open',
      ]);

      // Corrected by hand: the next pass finds every figure agreeing, the busy address's included.
      await creditCustodyWallet(em, planted.id, 'SOL', -(3n * SOL) / 10n);
      await creditCustodyWallet(em, planted.id, 'USDC_SOL', -7n * USDC, { locked: -7n * USDC });
      assert.deepEqual(await pass(), { compared: 4 });
      assert.deepEqual((await drifts()).map((drift) => drift.status).sort(), ['credited', 'resolved', 'resolved', 'resolved']);
    } finally {
      paying = false;
      await payments;
    }

    // The scanner's view at a slot below its cursor leaves out what it recorded above that slot: a deposit confirmed there.
    await eventually(async () => ((await balances(busy.id)).SOL === node.svm.getBalance(svmAddress(busy.address)) ? true : undefined), 'every busy deposit confirmed');
    const last = await eventually(async () => {
      const [deposit] = await (await testOrm()).em
        .fork()
        .execute<{ block_height: number; amount: string; status: string }[]>(
          `select block_height, amount::text, status::text from incoming_transfers where wallet_id = ? order by block_height desc limit 1`,
          [busy.id],
        );
      return deposit?.status === 'confirmed' ? deposit : undefined;
    }, 'the last busy deposit confirmed');
    const cursor = await scanned();
    const em = (await testOrm()).em.fork();
    const holder = [{ walletId: busy.id, addressId: (await em.execute<{ id: string }[]>(`select id from addresses where wallet_id = ?`, [busy.id]))[0]!.id, addresses: [busy.address] }];
    const [atCursor] = await ledgerViewAt(em, { chain: 'solana', environment: 'sandbox' }, holder, ['SOL'], { height: cursor });
    const [belowIt] = await ledgerViewAt(em, { chain: 'solana', environment: 'sandbox' }, holder, ['SOL'], { height: last.block_height - 1 });
    assert.equal(atCursor!.onChain, node.svm.getBalance(svmAddress(busy.address)), 'at the cursor: what the runtime holds now');
    assert.equal(atCursor!.onChain - belowIt!.onChain, BigInt(last.amount), 'below the last deposit: without it');
  });
});
