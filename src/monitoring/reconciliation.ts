import type { EntityManager } from '@mikro-orm/postgresql';
import { Gauge, type Registry } from 'prom-client';
import { ASSETS, assetById } from '../catalogue/service';
import type { ChainNodes } from '../chains/nodes';
import { Address, Wallet } from '../custody/entities';
import { postCustodyEntry } from '../custody/journal';
import { emit } from '../events/service';
import type { Logger } from '../logger';
import { toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { ChainScanCursor, LedgerDrift } from './entities';
import { holdersOf, ledgerPositions, type LedgerHolder, type LedgerPosition } from './ledger-check';
import type { ChainEnvironment } from './service';

/** Holders (addresses on account chains, wallets on Bitcoin) compared per page: one activity each. */
export const HOLDERS_PER_RECONCILIATION_PAGE = 200;

export interface ReconciliationDeps {
  chains: ChainNodes;
  log: Logger;
  em: () => EntityManager;
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
}

export interface ReconciliationPageInput extends ChainEnvironment {
  /** The last holder id of the previous page; null for the first. */
  cursor: string | null;
  /** Tests scope a pass to their own organization. */
  organizationId?: string;
}

export interface ReconciliationPage {
  /** The next page's cursor; null after the last page. */
  next: string | null;
  compared: number;
  /** The pass stops here: the chain's scanner has not read up to the node's tip, so the ledger cannot be expected to agree yet. */
  skipped?: 'scanner_behind';
}

/**
 * Compares one page of custody holders with the node, every asset the chain serves here, and
 * records what differs (src/monitoring/entities.ts LedgerDrift). A difference is first suspected:
 * a block mined between the scan and the balance reads explains most. When the next pass (or a
 * later one) finds the very same figures with no block mined while it read, it is real: on an
 * account chain, more on chain than the ledger knows is a deposit no transaction the scanner reads
 * explains (a contract wallet's or a batched transfer), credited as `unattributed_deposit`; any
 * other difference stays open for an operator. Either raises `ledger.drift` with both figures.
 * A holder whose figures agree again resolves its drift.
 */
export async function reconcileLedgerPage(deps: ReconciliationDeps, input: ReconciliationPageInput): Promise<ReconciliationPage> {
  const em = deps.em();
  const provider = await deps.chains.provider(input.chain, input.environment, em);
  const before = await provider.tip();
  const scanned = await em.findOne(ChainScanCursor, { chain: input.chain, environment: input.environment });
  if (!scanned || scanned.height < before.height) return { next: null, compared: 0, skipped: 'scanner_behind' };

  const { holders, next } = await holderPage(em, input);
  const assetIds = ASSETS.filter((asset) => asset.chain === input.chain && (asset.type === 'native' || provider.tokenAddress(asset.id))).map((asset) => asset.id);
  const positions = await ledgerPositions(em, provider, input.chain, holders, assetIds);
  const after = await provider.tip();
  // A block mined while the balances were read may hold transfers the scanner has not seen: nothing found in this pass is confirmed.
  const steady = after.height === before.height && after.hash === before.hash;
  const wallets = new Map((await em.find(Wallet, { id: { $in: [...new Set(holders.map((holder) => holder.walletId))] } })).map((wallet) => [wallet.id, wallet]));
  await deps.transaction(async (tx) => {
    for (const position of positions) await judgePosition(tx, deps.log, wallets.get(position.walletId)!, position, steady);
  });
  return { next, compared: holders.length };
}

/** One page of holders in id order: addresses of the chain's wallets, or on Bitcoin the wallets themselves. */
async function holderPage(em: EntityManager, input: ReconciliationPageInput): Promise<{ holders: LedgerHolder[]; next: string | null }> {
  const walletScope = { chain: input.chain, environment: input.environment, ...(input.organizationId ? { organization: input.organizationId } : {}) };
  const after = input.cursor ? { id: { $gt: input.cursor } } : {};
  if (input.chain === 'bitcoin') {
    const wallets = await em.find(Wallet, { ...walletScope, ...after }, { orderBy: { id: 'asc' }, limit: HOLDERS_PER_RECONCILIATION_PAGE });
    return { holders: await holdersOf(em, wallets), next: wallets.length === HOLDERS_PER_RECONCILIATION_PAGE ? wallets.at(-1)!.id : null };
  }
  const addresses = await em.find(Address, { wallet: walletScope, ...after }, { orderBy: { id: 'asc' }, limit: HOLDERS_PER_RECONCILIATION_PAGE });
  return {
    holders: addresses.map((address) => ({ walletId: address.wallet.id, addressId: address.id, addresses: [address.address] })),
    next: addresses.length === HOLDERS_PER_RECONCILIATION_PAGE ? addresses.at(-1)!.id : null,
  };
}

async function judgePosition(em: EntityManager, log: Logger, wallet: Wallet, position: LedgerPosition, steady: boolean): Promise<void> {
  const drift = await em.findOne(LedgerDrift, { wallet: wallet.id, address: position.addressId, assetId: position.assetId, status: { $in: ['suspected', 'open'] } });
  const now = new Date();
  if (position.ledger === position.chain) {
    if (drift) Object.assign(drift, { status: 'resolved', resolvedAt: now, lastSeenAt: now });
    return;
  }
  const figures = { ledgerAmount: position.ledger.toString(), chainAmount: position.chain.toString() };
  if (!drift) {
    em.create(LedgerDrift, {
      organization: wallet.organization,
      environment: wallet.environment,
      chain: wallet.chain,
      wallet,
      address: position.addressId,
      assetId: position.assetId,
      ...figures,
      status: 'suspected',
      firstSeenAt: now,
      lastSeenAt: now,
    });
    await em.flush();
    return;
  }
  const same = drift.ledgerAmount === figures.ledgerAmount && drift.chainAmount === figures.chainAmount;
  Object.assign(drift, figures, { lastSeenAt: now });
  if (drift.status === 'open' || !same || !steady) {
    await em.flush();
    return;
  }
  const surplus = position.chain - position.ledger;
  if (surplus > 0n && wallet.chain !== 'bitcoin') {
    await postCustodyEntry(em, {
      walletId: wallet.id,
      addressId: position.addressId,
      assetId: position.assetId,
      kind: 'unattributed_deposit',
      reference: { type: 'ledger_drift', id: drift.id },
      balance: surplus,
    });
    Object.assign(drift, { status: 'credited', resolvedAt: now });
  } else {
    drift.status = 'open';
  }
  await em.flush();
  log.warn(
    { drift_id: drift.id, chain: wallet.chain, environment: wallet.environment, wallet_id: wallet.id, asset_id: drift.assetId, ledger: drift.ledgerAmount, on_chain: drift.chainAmount, status: drift.status },
    drift.status === 'credited' ? 'ledger drift: an unattributed deposit credited' : 'ledger drift: the ledger and the chain disagree',
  );
  await emit(em, { organizationId: wallet.organization.id, environment: wallet.environment, type: 'ledger.drift', data: await presentDrift(em, drift), dedupeKey: `ledger.drift:${drift.id}` });
}

export async function presentDrift(em: EntityManager, drift: LedgerDrift) {
  const asset = assetById(drift.assetId);
  const address = drift.address ? await em.findOneOrFail(Address, { id: drift.address.id }) : null;
  const ledger = BigInt(drift.ledgerAmount);
  const chain = BigInt(drift.chainAmount);
  return {
    id: drift.id,
    object: 'ledger_drift',
    chain: drift.chain,
    wallet_id: drift.wallet.id,
    address: address?.address ?? null,
    asset_id: asset.id,
    ledger_amount: toDisplay(ledger, asset.decimals),
    ledger_amount_raw: ledger.toString(),
    chain_amount: toDisplay(chain, asset.decimals),
    chain_amount_raw: chain.toString(),
    difference_raw: (chain - ledger).toString(),
    status: drift.status,
    first_seen_at: iso(drift.firstSeenAt),
    resolved_at: drift.resolvedAt ? iso(drift.resolvedAt) : null,
  };
}

/**
 * `/metrics`: the ledger drifts not resolved, by chain, environment, asset and status (suspected or
 * open), read from PostgreSQL at each scrape, so any API process reports what the worker found.
 */
export function registerLedgerDriftMetrics(metrics: Registry, em: () => EntityManager): void {
  new Gauge({
    name: 'custody_ledger_drifts',
    help: 'Custody ledger positions that differ from their node (status suspected: seen once; open: confirmed, waiting for an operator)',
    labelNames: ['chain', 'environment', 'asset', 'status'],
    registers: [metrics],
    async collect() {
      this.reset();
      const rows = await em().execute<{ chain: string; environment: string; asset_id: string; status: string; count: string }[]>(
        `select chain, environment, asset_id, status, count(*) as count from ledger_drifts where status in ('suspected', 'open') group by 1, 2, 3, 4`,
      );
      for (const row of rows) this.set({ chain: row.chain, environment: row.environment, asset: row.asset_id, status: row.status }, Number(row.count));
    },
  });
}
