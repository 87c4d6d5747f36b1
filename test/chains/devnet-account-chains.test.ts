import assert from 'node:assert/strict';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ed25519 } from '@noble/curves/ed25519';
import { secp256k1 } from '@noble/curves/secp256k1';
import { base58 } from '@scure/base';
import type { ChainId } from '../../src/catalogue/service';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { DevnetProvider } from '../../src/chains/devnet/provider';
import { secp256k1Address } from '../../src/keys/derivation';
import { testOrm } from '../support/environment';

/** A fresh address of each chain, in the form the platform derives. */
const freshAddress: Record<'tron' | 'solana', () => string> = {
  tron: () => secp256k1Address({ chain: 'tron', testnet: true, format: 'base58check' }, secp256k1.getPublicKey(secp256k1.utils.randomPrivateKey(), true)),
  solana: () => base58.encode(ed25519.getPublicKey(ed25519.utils.randomPrivateKey())),
};
const ASSETS: Record<'tron' | 'solana', [native: string, token: string]> = { tron: ['TRX', 'USDT_TRX'], solana: ['SOL', 'USDC_SOL'] };

describe('Devnet ledger: Tron and Solana', () => {
  for (const chain of ['tron', 'solana'] as const) {
    it(`${chain}: puts faucet native and token transfers in the mempool, then mines them: balances and the block show both`, async () => {
      const em = async () => (await testOrm()).em.fork() as EntityManager;
      const provider = new DevnetProvider(chain as ChainId, await testOrm());
      const to = freshAddress[chain]();
      const [native, token] = ASSETS[chain];
      const sent = [
        { assetId: native, amount: 2_000_000n, ...(await fundFromFaucet(await em(), chain, { to, assetId: native, amount: 2_000_000n })) },
        { assetId: token, amount: 3_000_000n, ...(await fundFromFaucet(await em(), chain, { to, assetId: token, amount: 3_000_000n })) },
      ];
      for (const { txid } of sent) assert.deepEqual(await provider.transactionStatus(txid), { state: 'pending' });
      assert.equal(await provider.balance(to, native), 0n);

      const tip = await mineDevnetBlocks(await em(), chain, 1);
      assert.equal(await provider.balance(to, native), 2_000_000n);
      assert.equal(await provider.balance(to, token), 3_000_000n);
      const block = (await provider.block(tip.height))!;
      for (const { txid, position, assetId, amount } of sent) {
        const seen = block.transfers.find((transfer) => transfer.txid === txid && transfer.position === position);
        assert.deepEqual({ to: seen?.to, assetId: seen?.assetId, amount: seen?.amount }, { to, assetId, amount });
        assert.equal(((await provider.transactionStatus(txid)) as { confirmations: number }).confirmations, 1);
      }
    });
  }
});
