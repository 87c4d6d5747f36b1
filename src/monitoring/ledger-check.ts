import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS } from '../catalogue/service';
import type { ChainProvider } from '../chains/provider';
import { Address, Wallet, WalletBalance } from '../custody/entities';
import { IncomingTransfer } from './entities';
import type { ChainEnvironment } from './service';

export interface LedgerMismatch {
  walletId: string;
  assetId: string;
  /** What the ledger says the wallet's addresses hold on chain: balance plus pending transfers already mined. */
  ledger: bigint;
  /** What the chain says they hold. */
  chain: bigint;
}

/**
 * The ledger invariant: for every wallet of the chain in the environment, and every asset of the
 * chain, the ledger's balance plus its mined-but-unconfirmed incoming transfers equals what the
 * chain itself says the wallet's addresses hold. Meaningful once scanning has caught up with the
 * tip the provider reads at (no block in between).
 */
export async function compareLedgerWithChain(
  em: EntityManager,
  provider: ChainProvider,
  scope: ChainEnvironment & { organizationId?: string; /** Default: every asset of the chain. */ assetIds?: string[] },
): Promise<{ wallets: number; mismatches: LedgerMismatch[] }> {
  const wallets = await em.find(Wallet, {
    chain: scope.chain,
    environment: scope.environment,
    ...(scope.organizationId ? { organization: scope.organizationId } : {}),
  });
  const mismatches: LedgerMismatch[] = [];
  for (const wallet of wallets) {
    const addresses = await em.find(Address, { wallet });
    const balances = await em.find(WalletBalance, { wallet });
    const minedPending = await em.find(IncomingTransfer, { wallet, status: 'pending', blockHeight: { $ne: null } });
    for (const asset of ASSETS.filter((candidate) => candidate.chain === scope.chain && (!scope.assetIds || scope.assetIds.includes(candidate.id)))) {
      const booked = BigInt(balances.find((row) => row.assetId === asset.id)?.balance ?? '0');
      const mined = minedPending.filter((row) => row.assetId === asset.id).reduce((sum, row) => sum + BigInt(row.amount), 0n);
      let onChain = 0n;
      for (const address of addresses) onChain += await provider.balance(address.address, asset.id);
      if (booked + mined !== onChain) mismatches.push({ walletId: wallet.id, assetId: asset.id, ledger: booked + mined, chain: onChain });
    }
  }
  return { wallets: wallets.length, mismatches };
}
