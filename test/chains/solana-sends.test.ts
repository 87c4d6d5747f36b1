import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { base58 } from '@scure/base';
import { mnemonicToSeedSync } from '@scure/bip39';
import type { SolanaRpcProvider } from '../../src/chains/providers/solana-rpc';
import { signTransfer } from '../../src/chains/transfers';
import { associatedTokenAccount, COMPUTE_BUDGET_PROGRAM, LAMPORTS_PER_SIGNATURE, priorityFeeOf, SET_COMPUTE_UNIT_LIMIT, SET_COMPUTE_UNIT_PRICE, SOLANA_TOKEN_ACCOUNT_RENT } from '../../src/chains/transfers/solana';
import { coinTypeFor, deriveKey } from '../../src/keys/derivation';
import { eventually } from '../support/eventually';
import { messageInstructions, mintData, putTokenProgramAccount, svmAddress, tokenAccountData, u64At } from '../support/litesvm';
import { createHotWallet, walletBalances } from '../support/reconciliation';
import type { ScannedService } from '../support/scanned-service';
import { SolanaNode } from '../support/solana-node';
import { startSolanaService } from '../support/solana-service';

const SOL = 1_000_000_000n;
const USDC = 1_000_000n;
const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const outsideKey = (index: number) => deriveKey(SEED, { chain: 'solana', testnet: false, coinType: coinTypeFor('solana', false), format: 'base58', account: randomInt(1, 2 ** 30), index });
const funder = outsideKey(0);

interface Transaction {
  id: string;
  status: string;
  fee_raw: string | null;
  fee_limit_raw: string;
  tx_hash: string | null;
}

/** The Compute Budget a signed transaction sets: its limit and price, as the runtime reads them. */
function computeBudgetOf(raw: string) {
  const budget = messageInstructions(raw).filter(({ program }) => program === base58.encode(COMPUTE_BUDGET_PROGRAM));
  const limit = budget.find(({ data }) => data[0] === SET_COMPUTE_UNIT_LIMIT)!.data;
  const price = budget.find(({ data }) => data[0] === SET_COMPUTE_UNIT_PRICE)!.data;
  return { unitLimit: BigInt(new DataView(limit.buffer, limit.byteOffset).getUint32(1, true)), unitPrice: u64At(price, 1) };
}

/**
 * Sends from a custody wallet through the API, Temporal and PostgreSQL to LiteSVM behind Solana's
 * JSON-RPC (test/support/solana-node.ts, a slot every 400 ms): the fee estimate and the send read the
 * transfer's compute budget from the node (simulateTransaction, getRecentPrioritizationFees over the
 * accounts it writes), the signed transaction carries that limit, and the runtime charges the fee quoted.
 */
describe('Solana sends (LiteSVM): the compute limit from the simulation, the fee quoted is the fee signed and charged', () => {
  const node = new SolanaNode();
  let service: ScannedService;
  let provider: SolanaRpcProvider;
  let mint: string;

  before(async () => {
    mint = outsideKey(1).address;
    putTokenProgramAccount(node.svm, mint, mintData(funder.address, 1_000_000n * USDC, 6));
    putTokenProgramAccount(node.svm, associatedTokenAccount(funder.address, mint), tokenAccountData(mint, funder.address, 1_000_000n * USDC));
    node.svm.airdrop(svmAddress(funder.address), (1_000n * SOL) as never);
    ({ service, provider } = await startSolanaService(node, 'Solana sends', mint));
  });

  after(async () => {
    await service?.stop();
    await node.stop();
  });

  const pay = async (to: string, assetId: 'SOL' | 'USDC_SOL', amount: bigint) => {
    const transfer = { chain: 'solana' as const, testnet: false, from: funder.address, to, assetId, amount, ...(assetId === 'USDC_SOL' ? { tokenAddress: mint } : {}) };
    await provider.broadcast(signTransfer({ ...transfer, fee: { model: 'flat', fee: LAMPORTS_PER_SIGNATURE }, recentBlock: await provider.recentBlock(), reference: `tx_${randomInt(2 ** 40)}` }, [funder]).raw);
  };
  const read = async (id: string) => (await service.call('GET', `/v1/transactions/${id}`)).body as Transaction;

  it('quotes, signs and charges a SOL and an SPL send at the limit the simulation gave (a fifth over its units, at least 1,000)', async () => {
    const wallet = await createHotWallet(service, 'Treasury', 'solana');
    await pay(wallet.address, 'SOL', 5n * SOL);
    await pay(wallet.address, 'USDC_SOL', 100n * USDC);
    await eventually(async () => {
      const balances = await walletBalances(service, wallet.id);
      return balances.SOL === 5n * SOL && balances.USDC_SOL === 100n * USDC ? true : undefined;
    }, 'the deposits credited');

    const outside = outsideKey(2).address;
    for (const [asset, amount] of [['SOL', '1.5'], ['USDC_SOL', '2.5']] as const) {
      const quoted = await service.call('POST', '/v1/transactions/estimate-fee', { wallet_id: wallet.id, to_address: outside, amount, asset });
      assert.equal(quoted.status, 200, quoted.text);
      const medium = quoted.body.fee_levels.medium as { amount_raw: string; breakdown: { key: string; value: string }[] };
      const quotedLimit = BigInt(medium.breakdown.find((entry) => entry.key === 'compute_unit_limit')!.value);

      const created = await service.call('POST', '/v1/transactions', { wallet_id: wallet.id, to_address: outside, amount, asset, fee_level: 'medium' });
      assert.equal(created.status, 201, created.text);
      const sent = created.body as Transaction;
      assert.equal(sent.fee_raw, medium.amount_raw, `${asset}: the send's fee is the one quoted`);
      const settled = await eventually(async () => {
        const transaction = await read(sent.id);
        return transaction.status === 'confirmed' || transaction.status === 'failed' ? transaction : undefined;
      }, `the ${asset} send settled`, 30_000, 250);
      assert.equal(settled.status, 'confirmed');

      const executed = node.executed.get(settled.tx_hash!)!;
      const signed = computeBudgetOf(executed.raw);
      const units = executed.unitsConsumed;
      const withMargin = units + (units * 20n + 99n) / 100n;
      assert.equal(signed.unitLimit, withMargin > 1_000n ? withMargin : 1_000n, `${asset}: the signed limit is the simulated units (${units}, as the runtime used them) plus a fifth, at least 1,000`);
      assert.equal(signed.unitLimit, quotedLimit, `${asset}: the limit quoted is the limit signed`);
      assert.equal(BigInt(executed.fee), LAMPORTS_PER_SIGNATURE + priorityFeeOf(signed), `${asset}: the runtime charges the signed budget`);
      assert.equal(BigInt(executed.fee), BigInt(medium.amount_raw), `${asset}: and that is the fee quoted`);
      // Settled, the send's fee is what left the sender beyond the transfer: an SPL send's also the new token account's rent.
      assert.equal(BigInt(settled.fee_raw!), BigInt(executed.fee) + (asset === 'USDC_SOL' ? SOLANA_TOKEN_ACCOUNT_RENT : 0n));
    }
  });
});
