import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS, type ChainId } from '../catalogue/service';
import type { ChainProvider } from '../chains/provider';
import { Address, Wallet } from '../custody/entities';
import type { ChainEnvironment } from './service';

/**
 * What the ledger holds on chain, compared one holder at a time: an address on account-based
 * chains (balances and locks are per address there), a wallet on Bitcoin (its coins are the
 * wallet's, whatever address they sit on).
 */
export interface LedgerHolder {
  walletId: string;
  /** Null on Bitcoin. */
  addressId: string | null;
  /** The on-chain addresses whose balances the holder sums: the one address, or all of a Bitcoin wallet's. */
  addresses: string[];
}

export interface LedgerPosition {
  walletId: string;
  addressId: string | null;
  assetId: string;
  /** What the ledger says is on chain: balance plus deposits mined but not yet confirmed, less what mined, unsettled sends took. */
  ledger: bigint;
  /** What the node says. */
  chain: bigint;
}

/**
 * The ledger invariant, per holder and asset: the ledger's balance plus its mined-but-unconfirmed
 * incoming transfers, less what its mined-but-unsettled sends took (amount and fee), plus what its
 * settled sends a reorganisation took off the chain had taken, equals what the node says the
 * holder's addresses hold. Meaningful once scanning and the sends' workflows have
 * caught up with the tip the provider reads at.
 */
export async function ledgerPositions(em: EntityManager, provider: ChainProvider, chain: ChainId, holders: LedgerHolder[], assetIds: string[]): Promise<LedgerPosition[]> {
  if (holders.length === 0) return [];
  const perAddress = chain !== 'bitcoin';
  const keys = holders.map((holder) => (perAddress ? holder.addressId! : holder.walletId));
  const list = keys.map(() => '?').join(', ');
  const assets = assetIds.map(() => '?').join(', ');
  const booked = await em.execute<{ key: string; asset_id: string; amount: string }[]>(
    perAddress
      ? `select address_id as key, asset_id, balance::text as amount from address_balances where address_id in (${list}) and asset_id in (${assets})`
      : `select wallet_id as key, asset_id, balance::text as amount from wallet_balances where wallet_id in (${list}) and asset_id in (${assets})`,
    [...keys, ...assetIds],
  );
  const mined = await em.execute<{ key: string; asset_id: string; amount: string }[]>(
    `select ${perAddress ? 'address_id' : 'wallet_id'} as key, asset_id, sum(amount)::text as amount from incoming_transfers
      where ${perAddress ? 'address_id' : 'wallet_id'} in (${list}) and status = 'pending' and block_height is not null group by 1, 2`,
    keys,
  );
  // Mined, not settled: the chain has paid them, the ledger not yet (taken away). Settled, but their block lost to a
  // reorganisation and not mined again (yet): the ledger has paid them, the chain not (given back), so they are no deposit.
  const sends = await em.execute<{ key: string; asset_id: string; recipient_amount: string; fee: string | null; failure_reason: string | null; unplaced: boolean }[]>(
    // What the recipient got is the mined candidate's: a replacement's once one is mined (nothing for a cancel).
    `select t.${perAddress ? 'from_address_id' : 'wallet_id'} as key, t.asset_id, coalesce(mined.recipient_amount, t.recipient_amount)::text as recipient_amount, t.fee::text, t.failure_reason,
            t.status <> 'confirming' as unplaced
       from transactions t left join transaction_replacements mined on mined.transaction_id = t.id and mined.tx_hash = t.mined_tx_hash
      where t.${perAddress ? 'from_address_id' : 'wallet_id'} in (${list})
        and (t.status = 'confirming' or (t.block_hash is null and (t.status = 'confirmed' or (t.status = 'failed' and t.failure_reason = 'reverted'))))`,
    keys,
  );
  const sum = (rows: { key: string; asset_id: string; amount: string }[], key: string, assetId: string) =>
    rows.filter((row) => row.key === key && row.asset_id === assetId).reduce((total, row) => total + BigInt(row.amount), 0n);
  const positions: LedgerPosition[] = [];
  for (const [index, holder] of holders.entries()) {
    const key = keys[index]!;
    for (const assetId of assetIds) {
      const native = ASSETS.find((asset) => asset.id === assetId)?.type === 'native';
      const taken = sends.filter((send) => send.key === key).reduce((total, send) => total + (send.unplaced ? -1n : 1n) * takenBy(send, assetId, native), 0n);
      let onChain = 0n;
      for (const address of holder.addresses) onChain += await provider.balance(address, assetId);
      positions.push({ walletId: holder.walletId, addressId: holder.addressId, assetId, ledger: sum(booked, key, assetId) + sum(mined, key, assetId) - taken, chain: onChain });
    }
  }
  return positions;
}

/** What a mined send took of one asset: the recipient's amount unless it reverted, and the fee of the native asset. */
function takenBy(send: { asset_id: string; recipient_amount: string; fee: string | null; failure_reason: string | null }, assetId: string, native: boolean): bigint {
  const amount = send.asset_id === assetId && send.failure_reason !== 'reverted' ? BigInt(send.recipient_amount) : 0n;
  return amount + (native ? BigInt(send.fee ?? '0') : 0n);
}

/** The holders of wallets' funds: each address on account chains, each wallet (with all its addresses) on Bitcoin. */
export async function holdersOf(em: EntityManager, wallets: Wallet[]): Promise<LedgerHolder[]> {
  if (wallets.length === 0) return [];
  const addresses = await em.find(Address, { wallet: { $in: wallets } }, { orderBy: { id: 'asc' } });
  return wallets.flatMap((wallet): LedgerHolder[] => {
    const own = addresses.filter((address) => address.wallet.id === wallet.id);
    return wallet.chain === 'bitcoin'
      ? [{ walletId: wallet.id, addressId: null, addresses: own.map((address) => address.address) }]
      : own.map((address) => ({ walletId: wallet.id, addressId: address.id, addresses: [address.address] }));
  });
}

/**
 * The ledger invariant for every wallet of the chain in the environment (of one organization when
 * given) and every asset of the chain (or `assetIds`): the positions that differ.
 */
export async function compareLedgerWithChain(
  em: EntityManager,
  provider: ChainProvider,
  scope: ChainEnvironment & { organizationId?: string; /** Default: every asset of the chain. */ assetIds?: string[] },
): Promise<{ wallets: number; mismatches: LedgerPosition[] }> {
  const wallets = await em.find(Wallet, {
    chain: scope.chain,
    environment: scope.environment,
    ...(scope.organizationId ? { organization: scope.organizationId } : {}),
  });
  const assetIds = scope.assetIds ?? ASSETS.filter((asset) => asset.chain === scope.chain).map((asset) => asset.id);
  const positions = await ledgerPositions(em, provider, scope.chain, await holdersOf(em, wallets), assetIds);
  return { wallets: wallets.length, mismatches: positions.filter((position) => position.ledger !== position.chain) };
}
