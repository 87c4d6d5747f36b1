import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS } from '../catalogue/service';
import type { ChainProvider } from '../chains/provider';
import { Address, Wallet, WalletBalance } from '../custody/entities';
import { OutgoingTransaction } from '../transactions/entities';
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
 * chain, the ledger's balance plus its mined-but-unconfirmed incoming transfers, less what its
 * mined-but-unsettled sends took (amount and fee), equals what the chain itself says the wallet's
 * addresses hold. Meaningful once scanning and the sends' workflows have caught up with the tip
 * the provider reads at (no block in between).
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
    const minedSends = await em.find(OutgoingTransaction, { wallet, status: 'confirming' });
    for (const asset of ASSETS.filter((candidate) => candidate.chain === scope.chain && (!scope.assetIds || scope.assetIds.includes(candidate.id)))) {
      const booked = BigInt(balances.find((row) => row.assetId === asset.id)?.balance ?? '0');
      const mined = minedPending.filter((row) => row.assetId === asset.id).reduce((sum, row) => sum + BigInt(row.amount), 0n);
      let onChain = 0n;
      for (const address of addresses) onChain += await provider.balance(address.address, asset.id);
      const sent = minedSends.reduce((sum, send) => sum + takenBy(send, asset.id, asset.type === 'native'), 0n);
      if (booked + mined - sent !== onChain) mismatches.push({ walletId: wallet.id, assetId: asset.id, ledger: booked + mined - sent, chain: onChain });
    }
  }
  return { wallets: wallets.length, mismatches };
}

/** What a mined send took of one asset: the recipient's amount unless it reverted, and the fee of the native asset. */
function takenBy(send: OutgoingTransaction, assetId: string, native: boolean): bigint {
  const amount = send.assetId === assetId && send.failureReason !== 'reverted' ? BigInt(send.recipientAmount) : 0n;
  return amount + (native ? BigInt(send.fee ?? '0') : 0n);
}
