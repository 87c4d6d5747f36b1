import { setTimeout as sleep } from 'node:timers/promises';
import { IsolationLevel } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ASSETS, findChain } from '../catalogue/service';
import type { ChainNodes } from '../chains/nodes';
import type { ChainProvider, ChainTip } from '../chains/provider';
import { Address, Wallet } from '../custody/entities';
import type { Logger } from '../logger';
import { creditFinalSurplus, judgeFigure, overdrawnFigure, type ComparedAt, type JudgedPosition } from './drifts';
import { ChainScanCursor, LedgerDrift, LedgerReconciliationPass, ScannedBlock, type LedgerFigure } from './entities';
import { holdersOf, ledgerViewAt, type LedgerHolder, type PinnedPosition } from './ledger-check';
import type { ChainEnvironment } from './service';
import { compareUtxoSets, tableOutputsAt, type UtxoSet } from './utxo-check';

export interface ReconciliationDeps {
  chains: ChainNodes;
  log: Logger;
  em: () => EntityManager;
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
  /** Holders (addresses on account chains, wallets on Bitcoin) compared per page, one activity each (LEDGER_RECONCILIATION_HOLDERS_PER_PAGE). */
  holdersPerPage: number;
  /** The chain's confirmation count (CHAIN_CONFIRMATIONS_<CHAIN>): how deep a surplus must be before it is credited. */
  confirmations: number;
}

export interface ReconciliationPageInput extends ChainEnvironment {
  /** Tests scope a pass to their own organization. */
  organizationId?: string;
}

export interface ReconciliationPage {
  /** The last holder compared; null after the last page (the pass is complete). */
  next: string | null;
  compared: number;
  /**
   * Nothing compared, the pass keeps its cursor: the chain's scanner has no cursor yet, (a node read at
   * its tip) the tip is not the scanner's block, or (a node read at its newest slot) the scanner did not
   * reach the slot read in time.
   */
  skipped?: 'scanner_behind';
}

/**
 * Compares the next page of the pass under way (its cursor is stored, so a pass resumes where it
 * stopped) with the chain at one block: the scanner's block N, the holders, their ledger and what the
 * scanner recorded read in one snapshot with the scanner's cursor, so the ledger's view is the
 * scanner's view at N, and the node read at N (comparedAtCursor); or, on a node that reads only its
 * newest state (Solana), the slot the node read at, and the scanner's view at that slot
 * (comparedAtNewest). src/monitoring/ledger-check.ts ledgerViewAt says what each figure is compared
 * with. A block mined meanwhile changes nothing read, so a difference is a verdict at once: `ledger.drift` with both figures; on an account chain, more on chain than the
 * ledger knows is a deposit no transaction the scanner reads explains (a contract wallet's, a batched
 * transfer), credited as `unattributed_deposit` once final and netted within the wallet
 * (src/monitoring/drifts.ts creditFinalSurplus). A figure that agrees again resolves its drift.
 */
export async function reconcileLedgerPage(deps: ReconciliationDeps, input: ReconciliationPageInput): Promise<ReconciliationPage> {
  const provider = await deps.chains.provider(input.chain, input.environment, deps.em());
  const pass = await passUnderWay(deps.em(), input);
  const assetIds = ASSETS.filter((asset) => asset.chain === input.chain && (asset.type === 'native' || provider.tokenAddress(asset.id))).map((asset) => asset.id);
  const readNewest = provider.balancesAtNewest?.bind(provider);
  const compared = readNewest
    ? await comparedAtNewest(deps, readNewest, input, pass.cursor ?? null, assetIds)
    : await comparedAtCursor(deps, provider, input, pass.cursor ?? null, assetIds);
  if (!compared) return { next: pass.cursor ?? null, compared: 0, skipped: 'scanner_behind' };
  const { holders, next, positions, chainAmounts, at, utxoSets } = compared;
  const wallets = new Map((await deps.em().find(Wallet, { id: { $in: [...new Set(holders.map((holder) => holder.walletId))] } })).map((wallet) => [wallet.id, wallet]));
  await deps.transaction(async (tx) => {
    // Every unresolved drift of the page's wallets, on any page: a surplus is netted against the wallet's other addresses.
    const unresolved = await tx.find(LedgerDrift, { wallet: { $in: [...wallets.keys()] }, status: { $in: ['suspected', 'open'] } });
    const judge = async (judged: JudgedPosition, figure: LedgerFigure, ledger: bigint, comparedWith: bigint) => {
      const { position } = judged;
      const drift =
        unresolved.find((row) => row.wallet.id === position.walletId && (row.address?.id ?? null) === position.addressId && row.assetId === position.assetId && row.figure === figure) ?? null;
      const judgedDrift = await judgeFigure(judged, figure, ledger, comparedWith, drift);
      if (judgedDrift && !drift) unresolved.push(judgedDrift);
      return judgedDrift;
    };
    for (const [index, position] of positions.entries()) {
      const judged = { em: tx, log: deps.log, wallet: wallets.get(position.walletId)!, position };
      const balance = await judge(judged, 'balance', position.onChain, chainAmounts[index]!);
      if (balance && judged.wallet.chain !== 'bitcoin') await creditFinalSurplus(judged, balance, at[index]!, deps.confirmations, unresolved);
      await judge(judged, 'locked', position.locked, position.lockedBySends);
      await judge(judged, 'pending', position.pending, position.pendingDeposits);
      await judge(judged, 'overdrawn', overdrawnFigure(position.available), 0n);
      const utxoSet = utxoSets?.[index];
      if (utxoSet) await judge(judged, 'utxo_set', utxoSet.table, utxoSet.chain);
    }
    await tx.flush();
    await advancePass(tx, input, pass.cursor ?? null, next, holders.length);
  });
  return { next, compared: holders.length };
}

const passScope = (input: ReconciliationPageInput) => ({ chain: input.chain, environment: input.environment, scope: input.organizationId ?? '' });

/** The pass under way, created on first use; a pass that has compared nothing yet starts now. */
async function passUnderWay(em: EntityManager, input: ReconciliationPageInput): Promise<LedgerReconciliationPass> {
  const { chain, environment, scope } = passScope(input);
  await em.execute(
    `insert into ledger_reconciliation_passes (chain, environment, scope, cursor, started_at, holders_compared) values (?, ?, ?, null, now(), 0)
     on conflict (chain, environment, scope) do update set started_at = now() where ledger_reconciliation_passes.cursor is null and ledger_reconciliation_passes.holders_compared = 0`,
    [chain, environment, scope],
  );
  return em.findOneOrFail(LedgerReconciliationPass, { chain, environment, scope }, { refresh: true });
}

/**
 * Moves the pass's cursor past the page, unless another run moved it meanwhile (the page was compared
 * twice: harmless); after the last page, records the complete pass and makes ready the next.
 */
async function advancePass(em: EntityManager, input: ReconciliationPageInput, from: string | null, next: string | null, compared: number): Promise<void> {
  const { chain, environment, scope } = passScope(input);
  const where = `where chain = ? and environment = ? and scope = ? and cursor is not distinct from ?`;
  if (next) {
    await em.execute(`update ledger_reconciliation_passes set cursor = ?, holders_compared = holders_compared + ? ${where}`, [next, compared, chain, environment, scope, from]);
    return;
  }
  await em.execute(
    `update ledger_reconciliation_passes set cursor = null, holders_compared = 0, last_started_at = started_at, last_completed_at = now(),
       last_holders_compared = holders_compared + ?, started_at = now() ${where}`,
    [compared, chain, environment, scope, from],
  );
}

/** One page of holders in id order after `cursor`: addresses of the chain's wallets, or on Bitcoin the wallets themselves. */
async function holderPage(em: EntityManager, input: ReconciliationPageInput, cursor: string | null, size: number): Promise<{ holders: LedgerHolder[]; next: string | null }> {
  const walletScope = { chain: input.chain, environment: input.environment, ...(input.organizationId ? { organization: input.organizationId } : {}) };
  const after = cursor ? { id: { $gt: cursor } } : {};
  if (input.chain === 'bitcoin') {
    const wallets = await em.find(Wallet, { ...walletScope, ...after }, { orderBy: { id: 'asc' }, limit: size });
    return { holders: await holdersOf(em, wallets), next: wallets.length === size ? wallets.at(-1)!.id : null };
  }
  const addresses = await em.find(Address, { wallet: walletScope, ...after }, { orderBy: { id: 'asc' }, limit: size });
  return {
    holders: addresses.map((address) => ({ walletId: address.wallet.id, addressId: address.id, addresses: [address.address] })),
    next: addresses.length === size ? addresses.at(-1)!.id : null,
  };
}

/** A page of holders, the ledger's view of each position (holder and asset) and what the chain held, in the same order. */
interface ComparedPage {
  holders: LedgerHolder[];
  next: string | null;
  positions: PinnedPosition[];
  chainAmounts: bigint[];
  /** Per position, the block it was compared at. */
  at: ComparedAt[];
  /** UTXO chains: per position, the wallet's UTXO table against the node (null for other assets). */
  utxoSets?: (UtxoSet | null)[];
}

/**
 * The page at the scanner's cursor: its holders and their ledger read in one snapshot with the cursor,
 * then the node at that block; null when the scanner has no block yet or the node was not at it. On a
 * UTXO chain whose node answers unspentOutputsAt (Bitcoin), the wallets' UTXO table is read in the
 * same snapshot and each output it says is unspent checked with the node at the block (compareUtxoSets):
 * no address index, and the balance figure is what the node holds of those outputs. Elsewhere
 * holdingsAt reads the holders' balances.
 */
async function comparedAtCursor(deps: ReconciliationDeps, provider: ChainProvider, input: ReconciliationPageInput, cursor: string | null, assetIds: string[]): Promise<ComparedPage | null> {
  const unspentAt = provider.unspentOutputsAt?.bind(provider);
  const view = await deps.em().transactional(
    async (em) => {
      const scanned = await em.findOne(ChainScanCursor, { chain: input.chain, environment: input.environment });
      if (!scanned || scanned.hash === '') return null;
      const pin = { height: scanned.height, hash: scanned.hash };
      const page = await holderPage(em, input, cursor, deps.holdersPerPage);
      const outputs = unspentAt ? await tableOutputsAt(em, input, [...new Set(page.holders.map((holder) => holder.walletId))], pin) : [];
      return { pin, page, outputs, positions: await ledgerViewAt(em, input, page.holders, assetIds, pin) };
    },
    { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true },
  );
  if (!view) return null;
  const compared = { ...view.page, positions: view.positions, at: view.positions.map(() => view.pin) };
  if (!unspentAt) {
    const chainAmounts = await holdingsAt(provider, view.page.holders, view.positions, view.pin);
    return chainAmounts && { ...compared, chainAmounts };
  }
  const utxo = await compareUtxoSets(unspentAt, view.positions, view.outputs, findChain(input.chain).nativeAssetId, view.pin);
  if (!utxo) return null;
  for (const output of utxo.differing) {
    deps.log.warn(
      { chain: input.chain, environment: input.environment, wallet_id: output.walletId, outpoint: `${output.txid}:${output.vout}`, table: output.amount.toString(), node: output.onChain?.toString() ?? null, height: view.pin.height },
      'utxo set: an output the table counts as unspent is not so on the node',
    );
  }
  return { ...compared, chainAmounts: utxo.chainAmounts, utxoSets: utxo.utxoSets };
}

/** How long a page read at the node's newest slot waits for the scanner to reach that slot, and how often it looks. */
const SCANNER_REACH_MS = 30_000;
const SCANNER_POLL_MS = 250;

/**
 * The page on a node that reads only its newest state (Solana): the node first, each balance at the
 * slot it was read at (balancesAtNewest, one state per call); then, once the scanner's cursor is at or
 * past every such slot, the ledger as the scanner saw the chain at each one (ledgerViewAt below the
 * cursor), read in one snapshot. The node's tip moving meanwhile changes nothing read, so a page is
 * compared whenever the scanner keeps up with the node within SCANNER_REACH_MS; null when it did not.
 */
async function comparedAtNewest(
  deps: ReconciliationDeps,
  readNewest: NonNullable<ChainProvider['balancesAtNewest']>,
  input: ReconciliationPageInput,
  cursor: string | null,
  assetIds: string[],
): Promise<ComparedPage | null> {
  const page = await holderPage(deps.em(), input, cursor, deps.holdersPerPage);
  // Account chains: one address per holder, so one read per position, in ledgerViewAt's order.
  const cells = page.holders.flatMap((holder) => assetIds.map((assetId) => ({ holder, assetId })));
  const read = await readNewest(cells.map(({ holder, assetId }) => ({ address: holder.addresses[0]!, assetId })));
  const highest = Math.max(-1, ...read.map((balance) => balance.height));
  const reached = async () => {
    const scanned = await deps.em().findOne(ChainScanCursor, { chain: input.chain, environment: input.environment });
    return !!scanned && scanned.hash !== '' && scanned.height >= highest;
  };
  for (const deadline = Date.now() + SCANNER_REACH_MS; !(await reached()); await sleep(SCANNER_POLL_MS)) {
    if (Date.now() > deadline) return null;
  }
  const { positions, hashes } = await deps.em().transactional(
    async (em) => {
      const heights = [...new Set(read.map((balance) => balance.height))];
      const views = new Map<number, PinnedPosition[]>();
      for (const height of heights) {
        const holders = [...new Set(cells.filter((_, index) => read[index]!.height === height).map((cell) => cell.holder))];
        views.set(height, await ledgerViewAt(em, input, holders, assetIds, { height }));
      }
      const scanned = await em.find(ScannedBlock, { chain: input.chain, environment: input.environment, height: { $in: heights } });
      return {
        positions: cells.map(({ holder, assetId }, index) => views.get(read[index]!.height)!.find((position) => position.addressId === holder.addressId && position.assetId === assetId)!),
        hashes: new Map(scanned.map((block) => [block.height, block.hash])),
      };
    },
    { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true },
  );
  const at = read.map((balance) => ({ height: balance.height, hash: hashes.get(balance.height) ?? null }));
  return { ...page, positions, at, chainAmounts: read.map((balance) => balance.balance) };
}

/**
 * What each position's holder held at the block, in the positions' order: read at the block where the
 * provider can (Ethereum), else at the tip while the tip is that block before and after the reads
 * (the devnet; Bitcoin is compared by its UTXO set instead); null when it was not.
 */
async function holdingsAt(provider: ChainProvider, holders: LedgerHolder[], positions: PinnedPosition[], pin: ChainTip): Promise<bigint[] | null> {
  const addressesOf = new Map(holders.map((holder) => [holder.addressId ?? holder.walletId, holder.addresses]));
  const reads = positions.flatMap((position) => addressesOf.get(position.addressId ?? position.walletId)!.map((address) => ({ address, assetId: position.assetId })));
  let balances: bigint[];
  if (provider.balancesAt) {
    balances = await provider.balancesAt(reads, pin);
  } else {
    const atPin = async () => {
      const tip = await provider.tip();
      return tip.height === pin.height && tip.hash === pin.hash;
    };
    if (!(await atPin())) return null;
    balances = [];
    for (const read of reads) balances.push(await provider.balance(read.address, read.assetId));
    if (!(await atPin())) return null;
  }
  let offset = 0;
  return positions.map((position) => {
    const count = addressesOf.get(position.addressId ?? position.walletId)!.length;
    const held = balances.slice(offset, offset + count).reduce((total, balance) => total + balance, 0n);
    offset += count;
    return held;
  });
}
