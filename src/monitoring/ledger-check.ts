import { IsolationLevel } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS, findChain } from '../catalogue/service';
import type { ChainProvider, ChainTip } from '../chains/provider';
import { Address, Wallet } from '../custody/entities';
import { ChainScanCursor } from './entities';
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

/** A holder's figure the ledger and the node disagree on (compareLedgerWithChain). */
export interface LedgerPosition {
  walletId: string;
  addressId: string | null;
  assetId: string;
  /** What the ledger says is on chain (PinnedPosition.onChain at the scanner's cursor). */
  ledger: bigint;
  /** What the node says. */
  chain: bigint;
}

/**
 * What scanning debited for spends the platform did not expect (a send mined after it had failed
 * included) whose block a reorganisation took away: the chain does not show them now, the ledger
 * keeps them debited (their value in suspense) until the chain proves they will never be mined (then
 * returned: src/monitoring/never-mined.ts). Per holder and asset, the fee on the native row.
 */
function unplacedUnexpectedSpends(em: EntityManager, column: 'address_id' | 'wallet_id', keys: string[]) {
  return em.execute<{ key: string; asset_id: string; amount: string }[]>(
    `select ${column} as key, asset_id, sum(amount + fee)::text as amount from outgoing_transfers
      where unexpected and block_hash is null and lost_at is null and ${column} in (${keys.map(() => '?').join(', ')}) group by 1, 2`,
    keys,
  );
}

/** What a mined send took of one asset: the recipient's amount unless it reverted, and the fee of the native asset. */
function takenBy(send: Omit<SendTaken, 'key'>, assetId: string, native: boolean): bigint {
  const amount = send.asset_id === assetId && send.failure_reason !== 'reverted' ? BigInt(send.recipient_amount) : 0n;
  return amount + (native ? BigInt(send.fee ?? '0') : 0n);
}

/** A holder's ledger for one asset as the scanner saw the chain at a pinned block, and what each figure is compared with. */
export interface PinnedPosition {
  walletId: string;
  addressId: string | null;
  assetId: string;
  /**
   * What the chain must hold at the pinned block by the ledger: its balance, plus deposits mined at or
   * below it and not yet confirmed, less what the platform's sends the scanner saw mined at or below it
   * took while they are not settled, plus what settled sends and unexpected spends took that the chain does not show at it.
   * A pin below the scanner's cursor also takes off the deposits confirmed above it, and adds back the
   * spends the platform did not make debited above it.
   */
  onChain: bigint;
  locked: bigint;
  /** What the sends in flight lock: the asset sent, and of the native asset their fee limits and their replacements' extra fees. */
  lockedBySends: bigint;
  /** The ledger's balance less its locks: what the holder could spend; below zero only where a reorganisation reversed a deposit already spent. */
  available: bigint;
  pending: bigint;
  /** The deposits the scanner recorded and has not confirmed (mined or seen in the mempool). */
  pendingDeposits: bigint;
}

const IN_FLIGHT = `('pending', 'signed', 'broadcast', 'confirming')`;
const SETTLED = `(status = 'confirmed' or (status = 'failed' and failure_reason = 'reverted'))`;

/**
 * The ledger of each holder and asset as the scanner saw the chain at block `pin`, at or below its
 * cursor: read in one snapshot with the cursor (the caller's REPEATABLE READ transaction), so what the
 * scanner recorded is of blocks at or below the cursor, and what it recorded above the pin (Solana,
 * whose node reads its newest slot) is taken back out. A transfer recorded on a block the scanner has
 * since replaced (a reorganisation) does not count.
 */
export async function ledgerViewAt(em: EntityManager, scope: ChainEnvironment, holders: LedgerHolder[], assetIds: string[], pin: Pick<ChainTip, 'height'>): Promise<PinnedPosition[]> {
  if (holders.length === 0) return [];
  const perAddress = scope.chain !== 'bitcoin';
  const keys = holders.map((holder) => (perAddress ? holder.addressId! : holder.walletId));
  const list = keys.map(() => '?').join(', ');
  const column = perAddress ? 'address_id' : 'wallet_id';
  const sender = perAddress ? 'from_address_id' : 'wallet_id';
  const booked = await em.execute<{ key: string; asset_id: string; balance: string; locked: string; pending: string }[]>(
    `select ${column} as key, asset_id, balance::text, locked::text, pending::text from ${perAddress ? 'address_balances' : 'wallet_balances'} where ${column} in (${list})`,
    keys,
  );
  const deposits = await em.execute<{ key: string; asset_id: string; mined: string; pending: string; confirmed_above: string }[]>(
    `select ${column} as key, asset_id, coalesce(sum(amount) filter (where status = 'pending' and block_height <= ?), 0)::text as mined,
            coalesce(sum(amount) filter (where status = 'pending'), 0)::text as pending, coalesce(sum(amount) filter (where status = 'confirmed'), 0)::text as confirmed_above
       from incoming_transfers
      where chain = ? and environment = ? and (status = 'pending' or (status = 'confirmed' and block_height > ?)) and ${column} in (${list}) group by 1, 2`,
    [pin.height, scope.chain, scope.environment, pin.height, ...keys],
  );
  const unexpectedAbove = await em.execute<{ key: string; asset_id: string; debited: string }[]>(
    `select ${column} as key, asset_id, sum(amount + fee)::text as debited from outgoing_transfers o
      where chain = ? and environment = ? and unexpected and transaction_id is null and block_height > ? and ${column} in (${list})
        and not exists (select 1 from scanned_blocks b where b.chain = o.chain and b.environment = o.environment and b.height = o.block_height and b.hash <> o.block_hash)
      group by 1, 2`,
    [scope.chain, scope.environment, pin.height, ...keys],
  );
  const inFlight = await em.execute<{ key: string; id: string; asset_id: string; locked_amount: string; locked_fee: string }[]>(
    `select ${sender} as key, id, asset_id, locked_amount::text,
            (locked_fee + coalesce((select sum(r.locked_fee) from transaction_replacements r where r.transaction_id = t.id and r.status <> 'refused'), 0))::text as locked_fee
       from transactions t where chain = ? and environment = ? and status in ${IN_FLIGHT} and ${sender} in (${list})`,
    [scope.chain, scope.environment, ...keys],
  );
  const mined = await minedInFlight(em, scope, pin, inFlight.map((send) => send.id));
  // A send mined after it had failed was debited by scanning: its outgoing transfers stand for it (spendsUnplaced).
  const unplaced = await em.execute<SendTaken[]>(
    `select ${sender} as key, asset_id, recipient_amount::text, fee::text, failure_reason from transactions
      where chain = ? and environment = ? and ${SETTLED} and mined_after_failure_at is null and (block_hash is null or block_height > ?) and ${sender} in (${list})`,
    [scope.chain, scope.environment, pin.height, ...keys],
  );
  const spendsUnplaced = await unplacedUnexpectedSpends(em, column, keys);
  const native = findChain(scope.chain).nativeAssetId;
  return holders.flatMap((holder, index) => {
    const key = keys[index]!;
    return assetIds.map((assetId): PinnedPosition => {
      const isNative = assetId === native;
      const row = booked.find((candidate) => candidate.key === key && candidate.asset_id === assetId);
      const deposit = deposits.find((candidate) => candidate.key === key && candidate.asset_id === assetId);
      const sends = inFlight.filter((send) => send.key === key);
      const lockedBySends = sends.reduce((total, send) => total + (send.asset_id === assetId ? BigInt(send.locked_amount) : 0n) + (isNative ? BigInt(send.locked_fee) : 0n), 0n);
      const takenUnsettled = sends.reduce((total, send) => total + (mined.get(send.id)?.get(assetId) ?? 0n), 0n);
      const takenUnplaced =
        unplaced.filter((send) => send.key === key).reduce((total, send) => total + takenBy(send, assetId, isNative), 0n) +
        BigInt(spendsUnplaced.find((spend) => spend.key === key && spend.asset_id === assetId)?.amount ?? '0');
      const debitedAbove = BigInt(unexpectedAbove.find((candidate) => candidate.key === key && candidate.asset_id === assetId)?.debited ?? '0');
      const aboveThePin = debitedAbove - BigInt(deposit?.confirmed_above ?? '0');
      return {
        walletId: holder.walletId,
        addressId: holder.addressId,
        assetId,
        onChain: BigInt(row?.balance ?? '0') + BigInt(deposit?.mined ?? '0') - takenUnsettled + takenUnplaced + aboveThePin,
        locked: BigInt(row?.locked ?? '0'),
        available: BigInt(row?.balance ?? '0') - BigInt(row?.locked ?? '0'),
        lockedBySends,
        pending: BigInt(row?.pending ?? '0'),
        pendingDeposits: BigInt(deposit?.pending ?? '0'),
      };
    });
  });
}

type SendTaken = { key: string; asset_id: string; recipient_amount: string; fee: string | null; failure_reason: string | null };

/**
 * What each send in flight the scanner saw mined at or below `pin` took from its holder, per asset: on
 * an account chain what left the address (amount and fee) as recorded; on Bitcoin the outputs its
 * inputs spent less the change its mined candidate paid back to the wallet.
 */
async function minedInFlight(em: EntityManager, scope: ChainEnvironment, pin: Pick<ChainTip, 'height'>, sendIds: string[]): Promise<Map<string, Map<string, bigint>>> {
  const taken = new Map<string, Map<string, bigint>>();
  if (sendIds.length === 0) return taken;
  const list = sendIds.map(() => '?').join(', ');
  const rows = await em.execute<{ transaction_id: string; asset_id: string; taken: string }[]>(
    `with seen as (
       select o.* from outgoing_transfers o
        where o.chain = ? and o.environment = ? and o.transaction_id in (${list}) and o.block_height <= ?
          and not exists (select 1 from scanned_blocks b where b.chain = o.chain and b.environment = o.environment and b.height = o.block_height and b.hash <> o.block_hash))
     select transaction_id, asset_id, sum(amount)::text as taken from seen group by 1, 2
     union all
     select transaction_id, ?::text, sum(fee)::text from seen group by 1
     union all
     select w.created_by_id, ?::text, (-sum(w.amount))::text from wallet_outputs w
      where w.created_by_id in (${list}) and w.origin = 'change' and exists (select 1 from seen where seen.transaction_id = w.created_by_id and seen.txid = w.txid) group by 1`,
    [scope.chain, scope.environment, ...sendIds, pin.height, findChain(scope.chain).nativeAssetId, findChain(scope.chain).nativeAssetId, ...sendIds],
  );
  for (const row of rows) {
    const assets = taken.get(row.transaction_id) ?? new Map<string, bigint>();
    assets.set(row.asset_id, (assets.get(row.asset_id) ?? 0n) + BigInt(row.taken));
    taken.set(row.transaction_id, assets);
  }
  return taken;
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
 * given) and every asset of the chain (or `assetIds`): the positions where the ledger as the scanner
 * saw the chain at its cursor (ledgerViewAt, read in one snapshot with the cursor) differs from what
 * the node holds at its tip. Meaningful once scanning and the sends' workflows have caught up with the
 * tip (tests and drills; the reconciliation compares at a pinned block instead).
 */
export async function compareLedgerWithChain(
  em: EntityManager,
  provider: ChainProvider,
  scope: ChainEnvironment & { organizationId?: string; /** Default: every asset of the chain. */ assetIds?: string[] },
): Promise<{ wallets: number; mismatches: LedgerPosition[] }> {
  const assetIds = scope.assetIds ?? ASSETS.filter((asset) => asset.chain === scope.chain).map((asset) => asset.id);
  const tip = await provider.tip();
  const { holders, positions, wallets } = await em.transactional(
    async (tx) => {
      const scanned = await tx.findOne(ChainScanCursor, { chain: scope.chain, environment: scope.environment });
      const wallets = await tx.find(Wallet, { chain: scope.chain, environment: scope.environment, ...(scope.organizationId ? { organization: scope.organizationId } : {}) });
      const holders = await holdersOf(tx, wallets);
      return { holders, wallets: wallets.length, positions: await ledgerViewAt(tx, scope, holders, assetIds, { height: scanned?.height ?? tip.height }) };
    },
    { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true },
  );
  const mismatches: LedgerPosition[] = [];
  for (const position of positions) {
    const holder = holders.find((candidate) => candidate.walletId === position.walletId && candidate.addressId === position.addressId)!;
    let chain = 0n;
    for (const address of holder.addresses) chain += await provider.balance(address, position.assetId);
    if (chain !== position.onChain) mismatches.push({ walletId: position.walletId, addressId: position.addressId, assetId: position.assetId, ledger: position.onChain, chain });
  }
  return { wallets, mismatches };
}
