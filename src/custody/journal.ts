import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/lean';
import { counterpartyAccount, custodyAccount, type Counterparty, type OrganizationScope } from '../ledger/accounts';
import { projectionBreaks, type LedgerBreak, type ProjectionCheck, type ProjectionRow } from '../ledger/invariants';
import { post } from '../ledger/postings';

/**
 * The custody journal's kinds: what moved a wallet's balance, lock or pending amount. Incoming:
 * a deposit seen (pending), confirmed (pending to balance), dropped by a reorganisation (pending
 * undone), reversed after its confirmation. The platform's sends: the lock, its release, the
 * amount and the fee debited. The chain as the truth: a spend the platform did not make, a deposit
 * no transaction the scanner reads explains, and what a settled send a reorganisation took off the
 * chain had paid, back from suspense once the chain proves the send will never be mined.
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
  'reorg_returned',
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
  /** Signed deltas of the balance rows in base units (`balance` includes what is locked); omitted is zero. */
  balance?: bigint;
  locked?: bigint;
  pending?: bigint;
}

/**
 * What each kind moves the holder's funds against. Kinds that only move funds between a holder's
 * states (a deposit confirmed, a lock and its release) net to zero and post no counterparty line.
 */
const COUNTERPARTY: Record<CustodyEntryKind, Counterparty> = {
  opening_balance: 'opening_balances',
  deposit_seen: 'world',
  deposit_confirmed: 'world',
  deposit_dropped: 'world',
  deposit_reversed: 'world',
  send_lock: 'world',
  send_release: 'world',
  send_debit: 'world',
  fee_debit: 'network_fees',
  unexpected_spend: 'world',
  unattributed_deposit: 'world',
  reorg_returned: 'suspense',
};

/** A wallet's organization and environment never change: read once per process. */
const walletScopes = new Map<string, OrganizationScope>();

async function walletScope(em: EntityManager, walletId: string): Promise<OrganizationScope> {
  const known = walletScopes.get(walletId);
  if (known) return known;
  const [row] = await sql<{ organization_id: string; environment: OrganizationScope['environment'] }>(em, 'select organization_id, environment from wallets where id = $1', [walletId]);
  if (!row) throw new Error(`wallet ${walletId} not found`);
  if (walletScopes.size >= 100_000) walletScopes.clear();
  const scope = { organizationId: row.organization_id, environment: row.environment };
  walletScopes.set(walletId, scope);
  return scope;
}

/**
 * Posts the entry to the ledger once, as a balanced posting: the holder's accounts (the address's on
 * account-based chains, the wallet's on Bitcoin) move by the deltas (`balance` split into available
 * and locked), and what enters or leaves custody moves the kind's counterparty the other way. Then
 * the projections (the address's row, the wallet's row) move by the same deltas, in the caller's
 * transaction: all commit together or not at all. Returns false, moving nothing, when the same
 * wallet, asset, kind and reference was posted before, so a retried step cannot move money twice.
 * Rows are created at zero first, the address row before the wallet row (one order everywhere, so
 * concurrent movements cannot deadlock).
 */
export async function postCustodyEntry(em: EntityManager, entry: CustodyEntry): Promise<boolean> {
  const balance = entry.balance ?? 0n;
  const locked = entry.locked ?? 0n;
  const pending = entry.pending ?? 0n;
  const scope = await walletScope(em, entry.walletId);
  const holder = entry.addressId ?? entry.walletId;
  const posted = await post(em, {
    ...scope,
    key: `custody/${entry.walletId}/${entry.assetId}/${entry.kind}/${entry.reference.type}/${entry.reference.id}`,
    kind: entry.kind,
    reference: entry.reference,
    lines: [
      { account: custodyAccount(holder, entry.assetId, 'available'), amount: balance - locked },
      { account: custodyAccount(holder, entry.assetId, 'locked'), amount: locked },
      { account: custodyAccount(holder, entry.assetId, 'pending'), amount: pending },
      { account: counterpartyAccount(scope, COUNTERPARTY[entry.kind], entry.assetId), amount: -(balance + pending) },
    ],
  });
  if (!posted) return false;
  const deltas = [balance.toString(), locked.toString(), pending.toString()];
  if (entry.addressId) {
    await sql(
      em,
      `insert into address_balances (address_id, asset_id, wallet_id, balance, locked, pending, updated_at) values ($1, $2, $3, $4, $5, $6, now())
       on conflict (address_id, asset_id) do update set balance = address_balances.balance + excluded.balance,
         locked = address_balances.locked + excluded.locked, pending = address_balances.pending + excluded.pending, updated_at = now()`,
      [entry.addressId, entry.assetId, entry.walletId, ...deltas],
    );
  }
  await sql(
    em,
    `insert into wallet_balances (wallet_id, asset_id, balance, locked, pending, updated_at) values ($1, $2, $3, $4, $5, now())
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

/**
 * The custody balance rows as projections of the ledger: each address row (account-based chains)
 * equals its address's accounts, each wallet row the accounts of all its holders (its addresses, or
 * itself on Bitcoin); `balance` is available plus locked. A row with no lines, or lines with no row,
 * differs too.
 */
export const custodyBalanceProjection: ProjectionCheck = {
  name: 'custody_balances',
  async breaks(em: EntityManager, organizationId: string | null): Promise<LedgerBreak[]> {
    const rows = await sql<ProjectionRow>(
      em,
      `with sums as (
         select a.holder_id, a.asset, a.organization_id, a.environment,
                coalesce(sum(l.amount) filter (where a.type in ('custody_available', 'custody_locked')), 0) as balance,
                coalesce(sum(l.amount) filter (where a.type = 'custody_locked'), 0) as locked,
                coalesce(sum(l.amount) filter (where a.type = 'custody_pending'), 0) as pending
           from ledger_accounts a join ledger_lines l on l.account_key = a.key
          where a.type in ('custody_available', 'custody_locked', 'custody_pending') and ($1::text is null or a.organization_id = $1)
          group by a.holder_id, a.asset, a.organization_id, a.environment
       ), holders as (
         select s.*, ad.id is not null as is_address, coalesce(ad.wallet_id::text, s.holder_id) as wallet_id from sums s left join addresses ad on ad.id = s.holder_id::uuid
       ), address_rows as (
         select r.address_id::text as address_id, r.asset_id, w.organization_id::text as organization_id, w.environment, r.balance, r.locked, r.pending
           from address_balances r join wallets w on w.id = r.wallet_id where $1::text is null or w.organization_id = $1::text::uuid
       ), wallet_sums as (
         select wallet_id, asset, organization_id, environment, sum(balance) as balance, sum(locked) as locked, sum(pending) as pending
           from holders group by wallet_id, asset, organization_id, environment
       ), wallet_rows as (
         select r.wallet_id::text as wallet_id, r.asset_id, w.organization_id::text as organization_id, w.environment, r.balance, r.locked, r.pending
           from wallet_balances r join wallets w on w.id = r.wallet_id where $1::text is null or w.organization_id = $1::text::uuid
       )
       select 'address_balances:' || coalesce(r.address_id, h.holder_id) as subject, coalesce(r.organization_id, h.organization_id) as organization_id,
              coalesce(r.environment, h.environment) as environment, coalesce(r.asset_id, h.asset) as asset,
              jsonb_build_object('balance', h.balance::text, 'locked', h.locked::text, 'pending', h.pending::text) as ledger,
              jsonb_build_object('balance', r.balance::text, 'locked', r.locked::text, 'pending', r.pending::text) as projection
         from address_rows r full join (select * from holders where is_address) h on h.holder_id = r.address_id and h.asset = r.asset_id
       union all
       select 'wallet_balances:' || coalesce(r.wallet_id, s.wallet_id), coalesce(r.organization_id, s.organization_id),
              coalesce(r.environment, s.environment), coalesce(r.asset_id, s.asset),
              jsonb_build_object('balance', s.balance::text, 'locked', s.locked::text, 'pending', s.pending::text),
              jsonb_build_object('balance', r.balance::text, 'locked', r.locked::text, 'pending', r.pending::text)
         from wallet_rows r full join wallet_sums s on s.wallet_id = r.wallet_id and s.asset = r.asset_id`,
      [organizationId],
    );
    return projectionBreaks(rows);
  },
};
