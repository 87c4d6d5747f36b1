import type { EntityManager } from '@mikro-orm/postgresql';
import { prefixedId } from '../shared/ids';

/**
 * The custody journal's kinds: what moved a wallet's balance, lock or pending amount. Incoming:
 * a deposit seen (pending), confirmed (pending to balance), dropped by a reorganisation (pending
 * undone), reversed after its confirmation. The platform's sends: the lock, its release, the
 * amount and the fee debited. The chain as the truth: a spend the platform did not make, a deposit
 * no transaction the scanner reads explains.
 */
export const CUSTODY_ENTRY_KINDS = [
  'opening_balance',
  'deposit_seen',
  'deposit_confirmed',
  'deposit_dropped',
  'deposit_reversed',
  'send_lock',
  'send_release',
  'send_debit',
  'fee_debit',
  'unexpected_spend',
  'unattributed_deposit',
] as const;
export type CustodyEntryKind = (typeof CUSTODY_ENTRY_KINDS)[number];

export interface CustodyEntry {
  walletId: string;
  /** The custody address on account-based chains (balances and locks are per address there); null on Bitcoin. */
  addressId: string | null;
  assetId: string;
  kind: CustodyEntryKind;
  /** What moved it, unique per wallet, asset and kind: `{ type: 'transaction', id }`, `{ type: 'incoming_transfer', id }`... */
  reference: { type: string; id: string };
  /** Signed deltas in base units; omitted is zero. */
  balance?: bigint;
  locked?: bigint;
  pending?: bigint;
}

/**
 * Writes the entry once and moves the wallet's row (and the address's row when it names one) by
 * its deltas, in the caller's transaction: the entry and the rows commit together or not at all.
 * Returns false, moving nothing, when the same wallet, asset, kind and reference is already
 * journaled, so a retried step cannot move money twice. Rows are created at zero first, the
 * address row before the wallet row (one order everywhere, so concurrent movements cannot deadlock).
 */
export async function postCustodyEntry(em: EntityManager, entry: CustodyEntry): Promise<boolean> {
  const deltas = [(entry.balance ?? 0n).toString(), (entry.locked ?? 0n).toString(), (entry.pending ?? 0n).toString()];
  const written = await em.execute<{ id: string }[]>(
    `insert into custody_journal_entries (id, wallet_id, address_id, asset_id, kind, reference_type, reference_id, balance, locked, pending, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())
     on conflict (wallet_id, asset_id, kind, reference_type, reference_id) do nothing returning id`,
    [prefixedId('cje'), entry.walletId, entry.addressId, entry.assetId, entry.kind, entry.reference.type, entry.reference.id, ...deltas],
  );
  if (written.length === 0) return false;
  if (entry.addressId) {
    await em.execute(
      `insert into address_balances (address_id, asset_id, wallet_id, balance, locked, pending, updated_at) values (?, ?, ?, ?, ?, ?, now())
       on conflict (address_id, asset_id) do update set balance = address_balances.balance + excluded.balance,
         locked = address_balances.locked + excluded.locked, pending = address_balances.pending + excluded.pending, updated_at = now()`,
      [entry.addressId, entry.assetId, entry.walletId, ...deltas],
    );
  }
  await em.execute(
    `insert into wallet_balances (wallet_id, asset_id, balance, locked, pending, updated_at) values (?, ?, ?, ?, ?, now())
     on conflict (wallet_id, asset_id) do update set balance = wallet_balances.balance + excluded.balance,
       locked = wallet_balances.locked + excluded.locked, pending = wallet_balances.pending + excluded.pending, updated_at = now()`,
    [entry.walletId, entry.assetId, ...deltas],
  );
  return true;
}

/**
 * Posts several entries of one movement (a send's release and debits) in the one order every path
 * uses, by asset: two transactions moving the same rows then always take their locks in the same
 * order, and cannot deadlock.
 */
export async function postCustodyEntries(em: EntityManager, entries: CustodyEntry[]): Promise<void> {
  const ordered = entries.map((entry, index) => ({ entry, index })).sort((a, b) => a.entry.assetId.localeCompare(b.entry.assetId) || a.index - b.index);
  for (const { entry } of ordered) await postCustodyEntry(em, entry);
}

/** What one row (an address's, or on Bitcoin the wallet's) can spend of one asset: balance less locks. */
export interface Spendable {
  assetId: string;
  available: bigint;
}

/**
 * Locks what a send needs, all or nothing: the rows are read under a row lock (so concurrent sends
 * serialize), and only when each holds its need are the `send_lock` entries written. On an
 * account-based chain the rows are the sending address's; on Bitcoin, the wallet's. Returns the
 * shortfall (nothing locked) when a row cannot cover its need.
 */
export async function lockCustodyFunds(
  em: EntityManager,
  scope: { walletId: string; addressId: string | null; reference: { type: string; id: string } },
  needs: { assetId: string; amount: bigint }[],
): Promise<{ locked: true } | { locked: false; short: Spendable & { needed: bigint } }> {
  const wanted = needs.filter((need) => need.amount > 0n).sort((a, b) => a.assetId.localeCompare(b.assetId));
  for (const need of wanted) {
    const [row] = scope.addressId
      ? await em.execute<{ available: string }[]>(`select balance - locked as available from address_balances where address_id = ? and asset_id = ? for update`, [scope.addressId, need.assetId])
      : await em.execute<{ available: string }[]>(`select balance - locked as available from wallet_balances where wallet_id = ? and asset_id = ? for update`, [scope.walletId, need.assetId]);
    const available = BigInt(row?.available ?? '0');
    if (available < need.amount) return { locked: false, short: { assetId: need.assetId, available, needed: need.amount } };
  }
  for (const need of wanted) {
    await postCustodyEntry(em, { walletId: scope.walletId, addressId: scope.addressId, assetId: need.assetId, kind: 'send_lock', reference: scope.reference, locked: need.amount });
  }
  return { locked: true };
}

/**
 * What each address's ledger can spend (balance less locks) per asset: for choosing a sending
 * address, saying why none can send, and planning sweeps. Scope: a wallet's addresses, or the given ones.
 */
export async function spendableByAddress(em: EntityManager, scope: { walletId: string } | { addressIds: string[] }, assetIds?: string[]): Promise<Map<string, Map<string, bigint>>> {
  const byAddress = new Map<string, Map<string, bigint>>();
  const ids = 'walletId' in scope ? [scope.walletId] : scope.addressIds;
  if (ids.length === 0 || assetIds?.length === 0) return byAddress;
  const list = (values: string[]) => values.map(() => '?').join(', ');
  const rows = await em.execute<{ address_id: string; asset_id: string; available: string }[]>(
    `select address_id, asset_id, balance - locked as available from address_balances
      where ${'walletId' in scope ? 'wallet_id' : 'address_id'} in (${list(ids)})${assetIds ? ` and asset_id in (${list(assetIds)})` : ''}`,
    [...ids, ...(assetIds ?? [])],
  );
  for (const row of rows) {
    const assets = byAddress.get(row.address_id) ?? new Map<string, bigint>();
    assets.set(row.asset_id, BigInt(row.available));
    byAddress.set(row.address_id, assets);
  }
  return byAddress;
}

export interface JournalMismatch {
  table: 'wallet_balances' | 'address_balances';
  key: string;
  assetId: string;
  row: { balance: string; locked: string; pending: string };
  journal: { balance: string; locked: string; pending: string };
}

/**
 * The journal's invariant: every wallet row, and every address row, equals the sum of its entries
 * (balance, locked and pending apart), and no row exists without entries or entries without a row.
 * Empty when the ledger is whole. `walletIds` narrows it; by default every wallet.
 */
export async function journalMismatches(em: EntityManager, walletIds?: string[]): Promise<JournalMismatch[]> {
  const scoped = (column: string) => (walletIds ? `${column} in (${walletIds.map(() => '?').join(', ')})` : 'true');
  const params = walletIds ?? [];
  const compare = async (table: JournalMismatch['table'], key: string, entryFilter: string) =>
    em.execute<{ key: string; asset_id: string; rb: string | null; rl: string | null; rp: string | null; jb: string | null; jl: string | null; jp: string | null }[]>(
      `with journal as (
         select ${key} as key, asset_id, sum(balance) as b, sum(locked) as l, sum(pending) as p
           from custody_journal_entries where ${entryFilter} and ${scoped('wallet_id')} group by ${key}, asset_id
       ), rows as (
         select ${key} as key, asset_id, balance as b, locked as l, pending as p from ${table} where ${scoped('wallet_id')}
       )
       select coalesce(r.key, j.key)::text as key, coalesce(r.asset_id, j.asset_id) as asset_id,
              r.b::text as rb, r.l::text as rl, r.p::text as rp, j.b::text as jb, j.l::text as jl, j.p::text as jp
         from rows r full join journal j on j.key = r.key and j.asset_id = r.asset_id
        where coalesce(r.b, 0) <> coalesce(j.b, 0) or coalesce(r.l, 0) <> coalesce(j.l, 0) or coalesce(r.p, 0) <> coalesce(j.p, 0)`,
      [...params, ...params],
    );
  const found: JournalMismatch[] = [];
  for (const [table, key, filter] of [
    ['wallet_balances', 'wallet_id', 'true'],
    ['address_balances', 'address_id', 'address_id is not null'],
  ] as const) {
    for (const row of await compare(table, key, filter)) {
      found.push({
        table,
        key: row.key,
        assetId: row.asset_id,
        row: { balance: row.rb ?? '0', locked: row.rl ?? '0', pending: row.rp ?? '0' },
        journal: { balance: row.jb ?? '0', locked: row.jl ?? '0', pending: row.jp ?? '0' },
      });
    }
  }
  return found;
}
