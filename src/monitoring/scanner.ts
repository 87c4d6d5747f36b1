import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { triggerThresholdRules } from '../consolidation/thresholds';
import { ChainUnavailableError, servedChains, type ChainNodes } from '../chains/nodes';
import { NodeUnavailableError, type ChainProvider, type ObservedBlock } from '../chains/provider';
import type { Config } from '../config';
import type { Logger } from '../logger';
import type { WorkflowStarter } from '../temporal/starter';
import { chainScanFlow } from './flows/chain-scan';
import { ChainScanCursor, ScannedBlock } from './entities';
import { returnReorgedOut } from '../transactions/reorged-out';
import { resettleRemined, unplaceSettledOffChain, unplaceSettledSends } from '../transactions/settlement';
import { resolveNeverMined } from './never-mined';
import { recordOutgoing } from './outgoing';
import { unplaceOutgoingTransfers } from './suspense';
import { confirmDue, dropAbove, recordTransfers, requiredConfirmations, type ChainEnvironment } from './service';

/** How many recent block hashes are kept to find where a reorganisation forked. */
const FORK_SEARCH_DEPTH = 256;

export interface ScanDeps {
  chains: ChainNodes;
  config: Config;
  log: Logger;
  /** A fresh EntityManager for reads outside transactions. */
  em: () => EntityManager;
  /** Runs `work` in one transaction whose recorded workflow starts (webhook deliveries) fire once it commits. */
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
  /** Called as each block is committed: the activity's heartbeat, so a pass on a lost worker is retried within the heartbeat timeout. */
  blockDone?: () => void;
}

export interface ScanResult {
  /** The last block processed; null before the first. */
  height: number | null;
  tipHeight: number | null;
  caughtUp: boolean;
  /** Why the chain could not be read this time (no node, wrong network, unreachable); scanning tries again later. */
  unavailable?: string;
}

/**
 * One pass of block scanning for a chain in an environment: processes up to `maxBlocks` blocks
 * after the cursor, each in one transaction with the cursor's move (so a crash repeats nothing and
 * skips nothing), follows a reorganisation back to the fork, then confirms what reached its depth.
 */
export async function scanChain(deps: ScanDeps, scope: ChainEnvironment & { maxBlocks: number }): Promise<ScanResult> {
  let provider: ChainProvider;
  let tipHeight: number;
  let cursor: Cursor;
  try {
    provider = await deps.chains.provider(scope.chain, scope.environment);
    tipHeight = (await provider.tip()).height;
    cursor = await loadCursor(deps, scope, provider, tipHeight);
  } catch (error) {
    if (error instanceof ChainUnavailableError || error instanceof NodeUnavailableError) return { height: null, tipHeight: null, caughtUp: true, unavailable: error.message };
    throw error;
  }
  const required = requiredConfirmations(deps.config, scope.chain);
  const last = Math.min(tipHeight, cursor.height + scope.maxBlocks);
  const reads = new ReadAhead(provider, last);
  while (cursor.height < last) {
    const block = await reads.next(cursor.height + 1);
    if (!block) break;
    if (cursor.hash !== '' && block.parentHash !== cursor.hash) {
      reads.discard();
      cursor = await rewindToFork(deps, scope, provider, cursor);
      continue;
    }
    const lateMined = await deps.transaction(async (em) => {
      await advanceCursor(em, scope, cursor.height, block);
      await recordTransfers(em, { ...scope, requiredConfirmations: required, tipHeight }, block.transfers, { height: block.height, hash: block.hash, payments: block.payments, inputs: block.inputs });
      return (await recordOutgoing(em, scope, block)).filter((row) => row.unexpected && row.transactionId != null);
    });
    cursor = { height: block.height, hash: block.hash };
    if (lateMined.length) {
      deps.log.error(
        { ...scope, block_height: block.height, transactions: [...new Set(lateMined.map((row) => row.transactionId))], tx_hashes: [...new Set(lateMined.map((row) => row.txid))] },
        'a send that had failed (its lock released) was mined after all: debited what the chain shows, transaction.mined_after_failure raised',
      );
    }
    deps.blockDone?.();
  }
  if (cursor.height >= 0) {
    const processed = cursor.height;
    await deps.transaction(async (em) => triggerThresholdRules(em, deps.config, await confirmDue(em, deps.log, scope, processed)));
    const offChain = await deps.transaction((em) => unplaceSettledOffChain(em, scope));
    if (offChain.length) deps.log.error({ ...scope, transactions: offChain.map((row) => row.id) }, 'sends settled in blocks the chain no longer has (a branch scanning never read): taken off them, their value in suspense');
    const { resettled, waiting } = await resettleRemined(deps, provider, scope);
    if (resettled.length) deps.log.warn({ ...scope, transactions: resettled.map((row) => row.id) }, 'sends a reorganisation took off the chain are mined again: settled in their new blocks');
    const lost = await returnReorgedOut(deps, provider, waiting);
    if (lost.length) deps.log.error({ ...scope, transactions: lost.map((row) => row.id) }, 'sends a reorganisation took off the chain can never be mined again: failed as reorged_out, what they paid back in their wallets');
    const neverMined = await resolveNeverMined(deps, provider, scope, required);
    if (neverMined.deposits.length || neverMined.spends.length) {
      deps.log.warn(
        { ...scope, deposits: neverMined.deposits.map((row) => row.id), spends: neverMined.spends.map((row) => row.id) },
        'transfers a reorganisation took off the chain can never be mined again: reversed deposits written off, unexpected spends returned to their wallets',
      );
    }
  }
  return { height: cursor.height >= 0 ? cursor.height : null, tipHeight, caughtUp: cursor.height >= tipHeight };
}

/**
 * The blocks after the cursor, read up to the provider's `blockReadsInParallel` at once and handed out
 * in height order, so a node's round trip is paid once per window, not once per block. Each is still
 * checked against its parent and committed one by one; after a reorganisation the reads are discarded.
 */
class ReadAhead {
  private readonly reading = new Map<number, Promise<ObservedBlock | null>>();

  constructor(
    private readonly provider: ChainProvider,
    private readonly last: number,
  ) {}

  next(height: number): Promise<ObservedBlock | null> {
    const window = Math.max(1, this.provider.blockReadsInParallel ?? 1);
    for (let ahead = height; ahead < height + window && ahead <= this.last; ahead += 1) {
      if (this.reading.has(ahead)) continue;
      const read = this.provider.block(ahead);
      // A read never awaited (scanning stopped before it) must not be an unhandled rejection; an awaited one still throws.
      read.catch(() => undefined);
      this.reading.set(ahead, read);
    }
    const read = this.reading.get(height)!;
    this.reading.delete(height);
    return read;
  }

  discard(): void {
    this.reading.clear();
  }
}

interface Cursor {
  height: number;
  /** '' before the first block: nothing to check its parent against. */
  hash: string;
}

/**
 * The cursor, created on first use: the embedded devnet is scanned from its genesis, a real node
 * from its current tip (the service does not credit transfers made before it watched). A cursor
 * left by a node of another network (the configuration now names a different one) starts over.
 */
async function loadCursor(deps: ScanDeps, scope: ChainEnvironment, provider: ChainProvider, tipHeight: number): Promise<Cursor> {
  const em = deps.em();
  const identity = await provider.identifyNetwork();
  // The provider kind too: the devnet shares Sepolia's chain id, and a real Sepolia node is another chain.
  const network = `${provider.kind}:${identity.chainId !== undefined ? `chain-id:${identity.chainId}` : `network:${identity.network ?? 'unknown'}`}`;
  const where = { chain: scope.chain, environment: scope.environment };
  const existing = await em.findOne(ChainScanCursor, where);
  if (existing?.network === network) return { height: existing.height, hash: existing.hash };
  if (existing) {
    deps.log.warn({ ...where, was: existing.network, now: network }, 'the chain node serves another network than the scan cursor; scanning starts over at its tip');
    await em.nativeDelete(ScannedBlock, where);
    await em.nativeDelete(ChainScanCursor, { ...where, network: existing.network });
  }
  const start = provider.kind === 'devnet' ? -1 : tipHeight - 1;
  const hash = start >= 0 ? ((await provider.block(start))?.hash ?? '') : '';
  await em.execute(`insert into chain_scan_cursors (chain, environment, network, height, hash, updated_at) values (?, ?, ?, ?, ?, now()) on conflict do nothing`, [
    scope.chain,
    scope.environment,
    network,
    start,
    hash,
  ]);
  if (start >= 0) {
    // The start block is the first one a reorganisation can be traced back to.
    await em.execute(`insert into scanned_blocks (chain, environment, height, hash, scanned_at) values (?, ?, ?, ?, now()) on conflict do nothing`, [scope.chain, scope.environment, start, hash]);
  }
  const cursor = await em.findOneOrFail(ChainScanCursor, where, { refresh: true });
  return { height: cursor.height, hash: cursor.hash };
}

/** Moves the cursor from `from` to `block`, refusing if another scanner moved it meanwhile. */
async function advanceCursor(em: EntityManager, scope: ChainEnvironment, from: number, block: ObservedBlock): Promise<void> {
  const cursor = await em.findOneOrFail(ChainScanCursor, { chain: scope.chain, environment: scope.environment }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
  if (cursor.height !== from) throw new Error(`scan cursor of ${scope.chain} ${scope.environment} moved to ${cursor.height} while at ${from}: another scanner runs`);
  cursor.height = block.height;
  cursor.hash = block.hash;
  em.create(ScannedBlock, { chain: scope.chain, environment: scope.environment, height: block.height, hash: block.hash, scannedAt: new Date() });
  await em.nativeDelete(ScannedBlock, { chain: scope.chain, environment: scope.environment, height: { $lt: block.height - FORK_SEARCH_DEPTH } });
}

/**
 * The node's chain no longer extends the last block scanned: walks back to the newest block both
 * agree on and moves the cursor there. The transfers of the abandoned blocks are dropped (confirmed
 * deposits reversed) and the sends settled in them lose their block until they are mined again.
 * With no common block among the ones kept (a fork deeper than the lookback), scanning resyncs from
 * a checkpoint instead: the block just below the oldest one kept, as the node has it now.
 */
async function rewindToFork(deps: ScanDeps, scope: ChainEnvironment, provider: ChainProvider, cursor: Cursor): Promise<Cursor> {
  const em = deps.em();
  const known = await em.find(ScannedBlock, { chain: scope.chain, environment: scope.environment, height: { $lte: cursor.height } }, { orderBy: { height: 'desc' } });
  let fork: Cursor = { height: -1, hash: '' };
  for (const scanned of known) {
    const onNode = await provider.block(scanned.height);
    if (onNode?.hash === scanned.hash) {
      fork = { height: scanned.height, hash: scanned.hash };
      break;
    }
  }
  const resync = fork.height < 0 && known.length > 0;
  if (resync) {
    const height = known[known.length - 1]!.height - 1;
    fork = { height, hash: height >= 0 ? ((await provider.block(height))?.hash ?? '') : '' };
    deps.log.error(
      { ...scope, from_height: cursor.height, scanned_blocks: known.length, checkpoint_height: fork.height },
      'no common block with the node among the scanned blocks kept: resyncing from the checkpoint below them; transfers in older blocks are not checked again',
    );
  }
  const abandoned = await deps.transaction(async (tx) => {
    const state = await tx.findOneOrFail(ChainScanCursor, { chain: scope.chain, environment: scope.environment }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
    state.height = fork.height;
    state.hash = fork.hash;
    await tx.nativeDelete(ScannedBlock, { chain: scope.chain, environment: scope.environment, height: { $gt: fork.height } });
    if (resync) {
      state.resyncs += 1;
      state.lastResyncAt = new Date();
      // The checkpoint is the block a later reorganisation is traced back to.
      if (fork.hash !== '') tx.create(ScannedBlock, { chain: scope.chain, environment: scope.environment, height: fork.height, hash: fork.hash, scannedAt: new Date() });
    }
    return {
      ...(await dropAbove(tx, deps.log, scope, fork.height)),
      unplaced: await unplaceSettledSends(tx, scope, fork.height),
      spendsUnplaced: (await unplaceOutgoingTransfers(tx, scope, fork.height)).filter((row) => row.unexpected),
    };
  });
  deps.log.warn(
    { ...scope, from_height: cursor.height, fork_height: fork.height, dropped: abandoned.dropped.length, reversed: abandoned.reversed.length, sends_unplaced: abandoned.unplaced.length },
    'chain reorganisation: rescanning from the fork',
  );
  if (abandoned.reversed.length || abandoned.unplaced.length || abandoned.spendsUnplaced.length) {
    deps.log.error(
      {
        ...scope,
        fork_height: fork.height,
        reversed_transfers: abandoned.reversed.map((row) => row.id),
        unplaced_transactions: abandoned.unplaced.map((row) => row.id),
        unplaced_unexpected_spends: [...new Set(abandoned.spendsUnplaced.map((row) => row.txid))],
        outputs_in_use: abandoned.outputsInUse,
      },
      'reorganisation deeper than the confirmation count: confirmed deposits in abandoned blocks are reversed, settled sends and unexpected spends wait to be mined again, their value in suspense',
    );
  }
  return fork;
}

/** At worker start: the scanner of every chain and environment the service serves, unless it already runs. */
export async function ensureChainScanners(starter: WorkflowStarter, config: Config): Promise<void> {
  for (const served of servedChains(config)) {
    await starter.ensureRunning(chainScanFlow, { ...served, intervalSeconds: config.CHAIN_SCAN_INTERVAL_SECONDS });
  }
}
