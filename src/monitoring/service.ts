import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { ASSETS, findChain, networkFor, type AssetInfo, type ChainId } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import type { ObservedInput, ObservedPayment, ObservedTransfer } from '../chains/provider';
import type { Config } from '../config';
import { Address } from '../custody/entities';
import { postCustodyEntry, type CustodyEntryKind } from '../custody/journal';
import { Subscription } from '../events/entities';
import { emit } from '../events/service';
import type { EventType } from '../events/event-types';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { toDisplay } from '../shared/money';
import { iso, isoOrNull } from '../shared/time';
import { changeOutputsAmong, confirmDepositOutput, dropDepositOutput, recordDepositOutput, reverseDepositOutput } from '../transactions/wallet-outputs';
import type { Logger } from '../logger';
import { IncomingTransfer } from './entities';
import { closeReversedDeposit, holdReversedDeposit, reviewOverdrawn } from './suspense';

/** One chain in one environment: the unit block scanning works in. */
export interface ChainEnvironment {
  chain: ChainId;
  environment: Environment;
}

/** The block a transfer was mined in; null while it is only in the mempool. */
export interface BlockPlace {
  height: number;
  hash: string;
}

/** A block a scan records transfers of: where it is, and who signed and paid each of its transactions (account chains) or what each spends (UTXO chains). */
export interface ScannedPlace extends BlockPlace {
  payments?: ObservedPayment[];
  inputs?: ObservedInput[];
}

/**
 * What would prove the block's transaction `txid` never mined again, should a reorganisation take it
 * (NeverMinedProof): its signer and nonce (Ethereum), its recent blockhash (Solana), the outputs it spends
 * (`txid:vout`, Bitcoin); nulls elsewhere.
 */
export function provenanceOf(
  block: Pick<ScannedPlace, 'payments' | 'inputs'> | null,
  txid: string,
): { payer: string | null; payerNonce: string | null; recentBlockhash: string | null; spends: string[] | null } {
  const payment = block?.payments?.find((candidate) => candidate.txid === txid && (candidate.nonce !== undefined || candidate.recentBlockhash !== undefined));
  const spends = (block?.inputs ?? []).filter((input) => input.txid === txid).map((input) => `${input.spends.txid}:${input.spends.vout}`);
  return { payer: payment?.from ?? null, payerNonce: payment?.nonce?.toString() ?? null, recentBlockhash: payment?.recentBlockhash ?? null, spends: spends.length ? spends : null };
}

export const requiredConfirmations = (config: Pick<Config, `CHAIN_CONFIRMATIONS_${Uppercase<ChainId>}`>, chain: ChainId): number =>
  ({
    bitcoin: config.CHAIN_CONFIRMATIONS_BITCOIN,
    ethereum: config.CHAIN_CONFIRMATIONS_ETHEREUM,
    tron: config.CHAIN_CONFIRMATIONS_TRON,
    solana: config.CHAIN_CONFIRMATIONS_SOLANA,
  })[chain];

const assetOf = (assetId: string): AssetInfo => ASSETS.find((asset) => asset.id === assetId)!;
/** Stablecoins: their confirmed deposits also emit the specification's stablecoin deposit event. */
const isStablecoin = (asset: AssetInfo) => asset.symbol === 'USDC' || asset.symbol === 'USDT';

/** Who cares about a transfer to one address: the organization owning it, and every subscription watching it. */
interface Watchers {
  own: Address | null;
  subscriptions: Subscription[];
}

/**
 * Records the transfers one block made (or one transaction in the mempool, `block` null) to
 * addresses someone cares about: an address of ours (a deposit: the wallet's pending balance
 * grows) or one a subscription watches. Idempotent per organization and (txid, position): seeing
 * a transfer again only moves it to its block, and one a reorganisation dropped comes back pending.
 * Bitcoin: a deposit is also an output the wallet will spend once it confirms; an output that is the
 * change of the organization's own send is no deposit at all (no transfer, no credit, no event).
 */
export async function recordTransfers(
  em: EntityManager,
  scope: ChainEnvironment & { requiredConfirmations: number; tipHeight: number },
  transfers: ObservedTransfer[],
  block: ScannedPlace | null,
): Promise<IncomingTransfer[]> {
  const known = ASSETS.filter((asset) => asset.chain === scope.chain).map((asset) => asset.id);
  const relevant = transfers
    .filter((transfer) => transfer.amount > 0n && known.includes(transfer.assetId))
    .map((transfer) => ({ ...transfer, to: canonicalAddress(scope.chain, scope.environment, transfer.to) }))
    .filter((transfer): transfer is ObservedTransfer => transfer.to !== null);
  if (relevant.length === 0) return [];
  const watchers = await watchersOf(em, scope, [...new Set(relevant.map((transfer) => transfer.to))]);
  const change = scope.chain === 'bitcoin' ? await changeOutputsAmong(em, scope.environment, relevant) : new Set<string>();
  const recorded: IncomingTransfer[] = [];
  for (const transfer of relevant) {
    const watching = watchers.get(transfer.to);
    if (!watching) continue;
    const organizations = new Set([...(watching.own ? [watching.own.organization.id] : []), ...watching.subscriptions.map((s) => s.organization.id)]);
    for (const organizationId of organizations) {
      const own = watching.own?.organization.id === organizationId ? watching.own : null;
      if (own && change.has(`${transfer.txid.toLowerCase()}:${transfer.position}`)) continue;
      const subscriptions = watching.subscriptions.filter((subscription) => subscription.organization.id === organizationId);
      const row = await recordOne(em, scope, organizationId, transfer, block, own, subscriptions);
      if (row) recorded.push(row);
    }
  }
  return recorded;
}

async function watchersOf(em: EntityManager, scope: ChainEnvironment, addresses: string[]): Promise<Map<string, Watchers>> {
  const network = networkFor(findChain(scope.chain), scope.environment);
  const own = await em.find(Address, { chain: scope.chain, network, address: { $in: addresses }, wallet: { environment: scope.environment } }, { populate: ['wallet'] });
  const subscriptions = await subscriptionsOn(em, scope, addresses);
  const watchers = new Map<string, Watchers>();
  const entry = (address: string) => {
    let found = watchers.get(address);
    if (!found) watchers.set(address, (found = { own: null, subscriptions: [] }));
    return found;
  };
  for (const address of own) entry(address.address).own = address;
  for (const subscription of subscriptions) entry(canonicalAddress(scope.chain, scope.environment, subscription.address)!).subscriptions.push(subscription);
  return watchers;
}

/**
 * The active subscriptions watching any of `addresses` (canonical forms), optionally of one
 * organization. Subscriptions made before addresses were stored canonically may hold an Ethereum
 * address in lower case: both spellings are matched.
 */
export function subscriptionsOn(em: EntityManager, scope: ChainEnvironment, addresses: string[], organizationId?: string): Promise<Subscription[]> {
  const spellings = scope.chain === 'ethereum' ? addresses.flatMap((address) => [address, address.toLowerCase()]) : addresses;
  return em.find(Subscription, {
    ...(organizationId ? { organization: organizationId } : {}),
    chain: scope.chain,
    environment: scope.environment,
    status: 'active',
    deletedAt: null,
    address: { $in: spellings },
  });
}

async function recordOne(
  em: EntityManager,
  scope: ChainEnvironment & { requiredConfirmations: number; tipHeight: number },
  organizationId: string,
  transfer: ObservedTransfer,
  block: ScannedPlace | null,
  own: Address | null,
  subscriptions: Subscription[],
): Promise<IncomingTransfer | null> {
  const provenance = provenanceOf(block, transfer.txid);
  const inserted = await em.execute<{ id: string }[]>(
    `insert into incoming_transfers (id, organization_id, environment, wallet_id, address_id, chain, network, asset_id, amount, txid, position,
       to_address, from_address, block_height, block_hash, confirmations, required_confirmations, payer, payer_nonce, recent_blockhash, spends, status, created_at, updated_at)
     values (gen_random_uuid(), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, 'pending', now(), now())
     on conflict (organization_id, environment, chain, txid, position) do nothing returning id`,
    [
      organizationId,
      scope.environment,
      own?.wallet.id ?? null,
      own?.id ?? null,
      scope.chain,
      networkFor(findChain(scope.chain), scope.environment),
      transfer.assetId,
      transfer.amount.toString(),
      transfer.txid,
      transfer.position,
      transfer.to,
      transfer.from,
      block?.height ?? null,
      block?.hash ?? null,
      block ? scope.tipHeight - block.height + 1 : 0,
      scope.requiredConfirmations,
      provenance.payer,
      provenance.payerNonce,
      provenance.recentBlockhash,
      provenance.spends && JSON.stringify(provenance.spends),
    ],
  );
  const row = await em.findOneOrFail(
    IncomingTransfer,
    { organization: organizationId, environment: scope.environment, chain: scope.chain, txid: transfer.txid, position: transfer.position },
    { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true },
  );
  if (inserted.length) {
    if (row.wallet) await creditPending(em, row);
    await announce(em, row, subscriptions);
    return row;
  }
  if (!block || row.status === 'confirmed') return null;
  const moved = row.blockHash !== block.hash;
  // First seen in the mempool (a sandbox deposit): its block says who signed it.
  if (row.neverMined.payer == null && row.neverMined.spends == null) Object.assign(row.neverMined, provenance);
  row.blockHeight = block.height;
  row.blockHash = block.hash;
  row.confirmations = scope.tipHeight - block.height + 1;
  if (row.status === 'dropped') {
    // A reorganisation dropped it and the new chain carries it again: pending once more.
    row.status = 'pending';
    row.droppedAt = null;
    if (row.wallet) await creditPending(em, row);
    await announce(em, row, subscriptions);
    return row;
  }
  return moved ? row : null;
}

/** A deposit seen: the wallet's pending balance grows; on Bitcoin it also holds a new (unconfirmed) output. */
async function creditPending(em: EntityManager, row: IncomingTransfer): Promise<void> {
  await postDepositEntry(em, row, 'deposit_seen', { pending: BigInt(row.amount) });
  if (row.chain === 'bitcoin') {
    await recordDepositOutput(em, {
      organizationId: row.organization.id,
      environment: row.environment,
      walletId: row.wallet!.id,
      addressId: row.address!.id,
      txid: row.txid,
      position: row.position,
      amount: row.amount,
    });
  }
}

/**
 * A deposit's journal entry, on its address (account chains) or its wallet (Bitcoin). A transfer
 * can be taken off the chain by a reorganisation (dropped, or reversed once confirmed) and seen
 * again: each round is its own reference (`<transfer id>#<rounds before>`), so the journal keeps
 * every round and none twice.
 */
async function postDepositEntry(em: EntityManager, row: IncomingTransfer, kind: CustodyEntryKind, deltas: { balance?: bigint; pending?: bigint }): Promise<void> {
  await postCustodyEntry(em, {
    walletId: row.wallet!.id,
    addressId: row.chain === 'bitcoin' ? null : row.address!.id,
    assetId: row.assetId,
    kind,
    reference: { type: 'incoming_transfer', id: `${row.id}#${row.reorganisations}` },
    ...deltas,
  });
}

/**
 * Confirms every pending transfer of the chain mined at least the required depth below `tipHeight`:
 * the amount moves from the wallet's pending to its balance, once (the row is locked and re-read).
 */
export async function confirmDue(em: EntityManager, log: Logger, scope: ChainEnvironment, tipHeight: number): Promise<IncomingTransfer[]> {
  await em.execute(
    `update incoming_transfers set confirmations = ? - block_height + 1, updated_at = now()
     where chain = ? and environment = ? and status = 'pending' and block_height is not null and confirmations <> ? - block_height + 1`,
    [tipHeight, scope.chain, scope.environment, tipHeight],
  );
  const due = await em.find(
    IncomingTransfer,
    { chain: scope.chain, environment: scope.environment, status: 'pending', blockHeight: { $ne: null } },
    { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true, orderBy: { blockHeight: 'asc', id: 'asc' } },
  );
  const confirmed: IncomingTransfer[] = [];
  for (const row of due) {
    if (tipHeight - row.blockHeight! + 1 < row.requiredConfirmations) continue;
    row.status = 'confirmed';
    row.confirmations = tipHeight - row.blockHeight! + 1;
    row.confirmedAt = new Date();
    if (row.wallet) {
      await postDepositEntry(em, row, 'deposit_confirmed', { pending: -BigInt(row.amount), balance: BigInt(row.amount) });
      if (row.chain === 'bitcoin') await confirmDepositOutput(em, row);
      if (row.reorganisations > 0) {
        await closeReversedDeposit(em, row, 'mined_again');
        await reviewOverdrawn(em, log, row);
      }
    }
    await announce(em, row, await subscriptionsOn(em, row, [row.toAddress], row.organization.id));
    confirmed.push(row);
  }
  return confirmed;
}

/** What a reorganisation did to the transfers of the blocks it replaced. */
export interface Abandoned {
  /** Pending ones: they left the wallet's pending balance. */
  dropped: IncomingTransfer[];
  /** Confirmed ones (a fork deeper than the confirmation count): their credit was reversed. */
  reversed: IncomingTransfer[];
  /** Bitcoin: outputs of reversed deposits a send had already locked or spent, left for that send's fate to decide. */
  outputsInUse: string[];
}

/**
 * A reorganisation replaced the blocks above `forkHeight`: every transfer they carried is dropped
 * (it comes back, pending, if the new chain carries it). A pending deposit leaves the wallet's pending
 * balance; a confirmed one, already credited, is reversed by an entry that takes its amount off the
 * balance, and announced as `deposit.reversed` besides its status event.
 */
export async function dropAbove(em: EntityManager, log: Logger, scope: ChainEnvironment, forkHeight: number): Promise<Abandoned> {
  const above = await em.find(
    IncomingTransfer,
    { chain: scope.chain, environment: scope.environment, blockHeight: { $gt: forkHeight }, status: { $ne: 'dropped' } },
    { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true, orderBy: { blockHeight: 'asc', id: 'asc' } },
  );
  const abandoned: Abandoned = { dropped: [], reversed: [], outputsInUse: [] };
  for (const row of above) {
    const wasConfirmed = row.status === 'confirmed';
    if (row.wallet) {
      const amount = BigInt(row.amount);
      await postDepositEntry(em, row, wasConfirmed ? 'deposit_reversed' : 'deposit_dropped', wasConfirmed ? { balance: -amount } : { pending: -amount });
      if (wasConfirmed) await holdReversedDeposit(em, row);
      if (row.chain === 'bitcoin') {
        if (!wasConfirmed) await dropDepositOutput(em, row);
        else if (await reverseDepositOutput(em, row)) abandoned.outputsInUse.push(`${row.txid}:${row.position}`);
      }
    }
    Object.assign(row, { status: 'dropped', droppedAt: new Date(), confirmedAt: null, blockHeight: null, blockHash: null, confirmations: 0 });
    row.reorganisations += 1;
    await announce(em, row, await subscriptionsOn(em, row, [row.toAddress], row.organization.id));
    if (wasConfirmed && row.wallet) {
      await emit(em, {
        organizationId: row.organization.id,
        environment: row.environment,
        type: 'deposit.reversed',
        data: presentTransferEvent(row),
        dedupeKey: `deposit.reversed:${row.chain}:${row.txid}:${row.position}:${row.reorganisations}`,
      });
    }
    (wasConfirmed ? abandoned.reversed : abandoned.dropped).push(row);
  }
  // Once every reversal is posted: a holder that had spent a reversed deposit is overdrawn, and said so.
  for (const row of abandoned.reversed) await reviewOverdrawn(em, log, row);
  return abandoned;
}

/**
 * One event per status a transfer reaches: `incoming_native_tx` or `incoming_token_tx` to the
 * organization's endpoints (for its own addresses) and to the subscriptions watching the address;
 * a confirmed stablecoin deposit also emits `deposit.success`. A transfer seen again after a
 * reorganisation is a new sighting: its statuses are announced again.
 */
async function announce(em: EntityManager, row: IncomingTransfer, subscriptions: Subscription[]): Promise<void> {
  const asset = assetOf(row.assetId);
  const type: EventType = asset.type === 'native' ? 'incoming_native_tx' : 'incoming_token_tx';
  const data = presentTransferEvent(row);
  const destinations = subscriptions.map((subscription) => ({ kind: 'subscription' as const, id: subscription.id }));
  // The same status of the same sighting of a transfer in the same block is announced once, whoever records it.
  const place = `${row.status === 'pending' ? (row.blockHash ?? 'mempool') : row.status}${row.reorganisations ? `/${row.reorganisations}` : ''}`;
  await emit(em, {
    organizationId: row.organization.id,
    environment: row.environment,
    type,
    data,
    destinations,
    broadcast: row.wallet != null,
    dedupeKey: `${type}:${row.chain}:${row.txid}:${row.position}:${row.status}:${place}`,
  });
  if (row.status === 'confirmed' && row.wallet && isStablecoin(asset)) {
    await emit(em, {
      organizationId: row.organization.id,
      environment: row.environment,
      type: 'deposit.success',
      data,
      dedupeKey: `deposit.success:${row.chain}:${row.txid}:${row.position}${row.reorganisations ? `/${row.reorganisations}` : ''}`,
    });
  }
}

/** The event payload of a transfer: amounts as exact strings, display and base units. */
function presentTransferEvent(row: IncomingTransfer) {
  const asset = assetOf(row.assetId);
  return {
    id: row.id,
    object: 'incoming_transfer' as const,
    status: row.status,
    wallet_id: row.wallet?.id ?? null,
    address_id: row.address?.id ?? null,
    chain: row.chain,
    network: row.network,
    asset: asset.symbol,
    asset_id: asset.id,
    amount: toDisplay(row.amount, asset.decimals),
    amount_raw: row.amount,
    from_address: row.fromAddress ?? null,
    to_address: row.toAddress,
    tx_hash: row.txid,
    position: row.position,
    block_height: row.blockHeight ?? null,
    block_hash: row.blockHash ?? null,
    confirmations: row.confirmations,
    required_confirmations: row.requiredConfirmations,
    created_at: iso(row.createdAt),
    confirmed_at: isoOrNull(row.confirmedAt),
  };
}

/** A deposit: an incoming transfer to one of the organization's own addresses. */
export function presentDeposit(row: IncomingTransfer) {
  return { ...presentTransferEvent(row), object: 'deposit' as const, updated_at: iso(row.updatedAt), dropped_at: isoOrNull(row.droppedAt) };
}

export async function findDeposit(em: EntityManager, scope: { organizationId: string; environment: Environment }, id: string): Promise<IncomingTransfer> {
  const row = isUuid(id)
    ? await em.findOne(IncomingTransfer, { id, organization: scope.organizationId, environment: scope.environment, wallet: { $ne: null } })
    : null;
  if (!row) throw errors.notFound('deposit', id);
  return row;
}

