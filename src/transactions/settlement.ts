/**
 * The end of a send: settled once mined at its confirmation count (debited, its locks released),
 * failed when it can never be mined, and re-settled after a reorganisation moved it; with the
 * journal entries and events each of these writes.
 */
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { assetById } from '../catalogue/service';
import type { ChainProvider } from '../chains/provider';
import { postCustodyEntries, type CustodyEntry } from '../custody/journal';
import { enterSuspense, leaveSuspense, type SuspenseItem } from '../ledger/suspense';
import { emit } from '../events/service';
import type { EventType } from '../events/event-types';
import { OutgoingTransaction, TransactionReplacement, type TransactionStatus } from './entities';
import { nativeAssetOf, presentTransaction } from './presenters';
import { moveChange, releaseOutputs, settleOutputs } from './wallet-outputs';
import { candidatesOf, FINISHED, lockedRow, markMinedCandidate, minedCandidateOf, minedFee, type Candidate, type LifecycleDeps } from './lifecycle';

/** A mined send's failure reason: its call reverted, or it was cancelled (its cancel mined: nothing sent, the fee paid); else none. */
export const minedOutcome = (succeeded: boolean, cancelled: boolean) => (!succeeded ? 'reverted' : cancelled ? 'cancelled' : null);

const FAILED_WHEN_MINED: Record<string, string> = {
  reverted: 'The transaction was mined but its call reverted: the fee was paid, nothing was sent.',
  cancelled: 'Cancelled: a zero-value transfer back to the sending address was mined with its nonce; the fee was paid, nothing was sent.',
};

/**
 * Settles a send mined at its confirmation count, once: the wallet is debited what left it (the
 * recipient's amount, unless the call reverted, and the fee actually paid) and its lock released
 * in full, so the part of the fee limit not used returns to the available balance.
 */
export async function settleTransaction(deps: LifecycleDeps, transactionId: string): Promise<TransactionStatus> {
  return deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    if (FINISHED.includes(transaction.status)) return transaction.status;
    if (transaction.fee == null) throw new Error(`transaction ${transaction.id} is mined but its fee is not known yet`);
    const mined = await minedCandidateOf(em, transaction);
    await postCustodyEntries(em, [...lockReleases(transaction), ...(await replacementLockReleases(em, transaction)), ...debitEntries(transaction, debitsOf(transaction, mined))]);
    if (transaction.chain === 'bitcoin') await settleOutputs(em, transaction.id, mined.txHash);
    await supersedeReplacements(em, transaction);
    await deps.walletDebited(em, transaction.wallet.id); // the wallet paid: if it is a gas station's, assess it again
    return recordOutcome(em, transaction);
  });
}

export interface SendDebit {
  kind: 'send_debit' | 'fee_debit';
  assetId: string;
  amount: bigint;
}

/** What a send mined as `mined` took from its wallet: that candidate's recipient amount unless its call reverted, and the fee in the native asset. */
export const debitsOf = (transaction: OutgoingTransaction, mined: Pick<Candidate, 'recipientAmount'>): SendDebit[] => [
  { kind: 'send_debit', assetId: transaction.assetId, amount: transaction.failureReason === 'reverted' ? 0n : BigInt(mined.recipientAmount) },
  { kind: 'fee_debit', assetId: nativeAssetOf(transaction).id, amount: BigInt(transaction.fee!) },
];

/** The entries that take `debits` (negative: give back) off the send's ledger, referencing its current settlement. */
function debitEntries(transaction: OutgoingTransaction, debits: SendDebit[]): CustodyEntry[] {
  const scope = { ...custodyScope(transaction), reference: { type: 'transaction', id: settlementOf(transaction) } };
  return debits.filter((debit) => debit.amount !== 0n).map((debit) => ({ ...scope, assetId: debit.assetId, kind: debit.kind, balance: -debit.amount }));
}

/** A mined send's status from its outcome (failed if its call reverted or it was cancelled, else confirmed), announced once per settlement. */
async function recordOutcome(em: EntityManager, transaction: OutgoingTransaction): Promise<TransactionStatus> {
  const now = new Date();
  const failureMessage = transaction.failureReason ? FAILED_WHEN_MINED[transaction.failureReason] : undefined;
  if (failureMessage) {
    Object.assign(transaction, { status: 'failed', failedAt: now, confirmedAt: null, failureMessage });
    await announce(em, transaction, 'transaction.failed');
    return 'failed';
  }
  Object.assign(transaction, { status: 'confirmed', confirmedAt: now, failedAt: null, failureMessage: null });
  await announce(em, transaction, 'transaction.confirmed');
  const asset = assetById(transaction.assetId);
  if (asset.symbol === 'USDC' || asset.symbol === 'USDT') {
    const data = await presentTransaction(em, transaction);
    await emit(em, {
      organizationId: transaction.organization.id,
      environment: transaction.environment,
      type: 'transfer.success',
      data: { ...data, transaction_id: transaction.id },
      dedupeKey: `transfer.success:${settlementOf(transaction)}`,
    });
  }
  return 'confirmed';
}

/** One settlement of a send: the send itself, and after each reorganisation that took its block away a new one (`<id>#<n>`). */
export const settlementOf = (transaction: OutgoingTransaction) => (transaction.reorganisations ? `${transaction.id}#${transaction.reorganisations}` : transaction.id);

/**
 * A reorganisation replaced the blocks above `forkHeight`: the sends settled in them lose their
 * block (status, debit and lock stay as settled) until `resettleRemined` finds them mined again.
 * What each had paid out (the recipient's amount, the fee) moves from the world and the network's
 * fees into suspense until then, and `transaction.reorged` says so. A send mined after it had failed
 * was debited by scanning, not by its settlement: its outgoing transfers carry that round instead.
 */
export async function unplaceSettledSends(em: EntityManager, scope: { chain: OutgoingTransaction['chain']; environment: OutgoingTransaction['environment'] }, forkHeight: number): Promise<OutgoingTransaction[]> {
  const settled = await em.find(
    OutgoingTransaction,
    { chain: scope.chain, environment: scope.environment, status: { $in: [...FINISHED] }, blockHeight: { $gt: forkHeight } },
    { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true, populate: ['fromAddress', 'wallet'] },
  );
  await unplace(em, settled);
  return settled;
}

/**
 * Settled sends whose recorded block is not the chain's block at that height as the scanner read it:
 * their workflow settled them from the node on a branch the scanner never scanned (it was behind),
 * so no fork above the cursor named them. Unplaced as `unplaceSettledSends` does.
 */
export async function unplaceSettledOffChain(em: EntityManager, scope: { chain: OutgoingTransaction['chain']; environment: OutgoingTransaction['environment'] }): Promise<OutgoingTransaction[]> {
  const rows = await em.execute<{ id: string }[]>(
    `select t.id from scanned_blocks b join transactions t on t.chain = b.chain and t.environment = b.environment and t.block_height = b.height
      where b.chain = ? and b.environment = ? and t.block_hash is not null and t.block_hash <> b.hash and t.status in ('confirmed', 'failed')`,
    [scope.chain, scope.environment],
  );
  if (rows.length === 0) return [];
  const settled = await em.find(
    OutgoingTransaction,
    { id: { $in: rows.map((row) => row.id) }, status: { $in: [...FINISHED] }, blockHash: { $ne: null } },
    { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true, populate: ['fromAddress', 'wallet'] },
  );
  await unplace(em, settled);
  return settled;
}

/** Each send loses its block; what it paid out moves into suspense and `transaction.reorged` says so. */
async function unplace(em: EntityManager, settled: OutgoingTransaction[]): Promise<void> {
  for (const transaction of settled) {
    const debits = transaction.minedAfterFailureAt ? [] : debitsOf(transaction, await minedCandidateOf(em, transaction));
    Object.assign(transaction, { blockHeight: null, blockHash: null, confirmations: 0 });
    transaction.reorganisations += 1;
    for (const item of suspenseItems(transaction, debits)) await enterSuspense(em, item);
    await announce(em, transaction, 'transaction.reorged');
  }
}

/** What a settled send paid out, per debit, as the suspense items of its current settlement round. */
const suspenseItems = (transaction: OutgoingTransaction, debits: SendDebit[]): SuspenseItem[] =>
  debits
    .filter((debit) => debit.amount !== 0n)
    .map((debit) => ({
      organizationId: transaction.organization.id,
      environment: transaction.environment,
      reference: { type: 'transaction', id: settlementOf(transaction) },
      assetId: debit.assetId,
      counterparty: debit.kind === 'fee_debit' ? 'network_fees' : 'world',
      amount: debit.amount,
    }));

/**
 * Settled sends a reorganisation took off the chain, mined again at their confirmation count: placed
 * in their new block. The candidate mined may be another than before (the original where a
 * replacement was, or the reverse): the send is re-settled on it, under the same send. Where the
 * outcome, the fee or what the recipient got changed (a call that reverted in the abandoned block
 * succeeds in the new one, a cancel mined where the speed-up was) the status is the new outcome's and
 * the wallet's debit corrected by the difference; on Bitcoin the change spendable is the mined
 * candidate's. Those not mined again at depth (yet) are asked again at the next pass. Answers the sends
 * re-settled, and those still waiting (transactions/reorged-out.ts follows their proof of loss).
 */
export async function resettleRemined(
  deps: Pick<LifecycleDeps, 'em' | 'transaction'>,
  provider: ChainProvider,
  scope: { chain: OutgoingTransaction['chain']; environment: OutgoingTransaction['environment'] },
): Promise<{ resettled: OutgoingTransaction[]; waiting: OutgoingTransaction[] }> {
  const unplaced = await deps.em().find(OutgoingTransaction, {
    chain: scope.chain,
    environment: scope.environment,
    blockHash: null,
    txHash: { $ne: null },
    $or: [{ status: 'confirmed' }, { status: 'failed', failureReason: { $in: ['reverted', 'cancelled'] } }],
  });
  const resettled: OutgoingTransaction[] = [];
  const waiting: OutgoingTransaction[] = [];
  for (const send of unplaced) {
    const found = await minedAtDepth(provider, await candidatesOf(deps.em(), send), send.requiredConfirmations);
    if (!found) {
      waiting.push(send);
      continue;
    }
    const { candidate, status } = found;
    const done = await deps.transaction(async (em) => {
      const transaction = await lockedRow(em, send.id);
      if (transaction.blockHash != null || !FINISHED.includes(transaction.status)) return false;
      const before = debitsOf(transaction, await minedCandidateOf(em, transaction));
      // Mined again at its confirmation count: what the abandoned block had paid out leaves suspense, and the new block's outcome is booked against it.
      for (const item of suspenseItems(transaction, before)) await leaveSuspense(em, item);
      const outcomeBefore = transaction.failureReason;
      const previous = transaction.minedTxHash!;
      if (candidate.txHash !== previous) {
        await markMinedCandidate(em, transaction, candidate);
        await supersedeReplacements(em, transaction);
        if (transaction.chain === 'bitcoin') await moveChange(em, transaction.id, previous, candidate.txHash);
      }
      Object.assign(transaction, { blockHeight: status.blockHeight, blockHash: status.blockHash, confirmations: status.confirmations });
      transaction.fee = minedFee(transaction, candidate, status.fee);
      transaction.failureReason = minedOutcome(status.succeeded, candidate.replacement?.kind === 'cancel');
      const after = debitsOf(transaction, candidate);
      await postCustodyEntries(em, debitEntries(transaction, after.map((debit, index) => ({ ...debit, amount: debit.amount - before[index]!.amount }))));
      // Its status event again, for this settlement round: what transaction.reorged opened is closed (a new outcome is recorded as one).
      if (transaction.failureReason !== outcomeBefore) await recordOutcome(em, transaction);
      else await announce(em, transaction, transaction.status === 'failed' ? 'transaction.failed' : 'transaction.confirmed');
      return true;
    });
    if (done) resettled.push(send);
  }
  return { resettled, waiting };
}

/** The candidate the chain holds mined at `depth` confirmations or more, if any. */
async function minedAtDepth(provider: ChainProvider, candidates: Candidate[], depth: number) {
  for (const candidate of candidates) {
    const status = await provider.transactionStatus(candidate.txHash);
    if (status.state === 'mined') return status.confirmations >= depth ? { candidate, status } : null;
  }
  return null;
}

/**
 * Fails a send that provably never reached the chain and never will: its lock (and Bitcoin outputs)
 * released, nothing debited, once. `spentInputs`: its inputs a conflicting mined transaction spent.
 */
export async function failTransaction(deps: LifecycleDeps, transactionId: string, reason: string, message: string, spentInputs: string[] = []): Promise<TransactionStatus> {
  return deps.transaction(async (em) => {
    const transaction = await lockedRow(em, transactionId);
    if (FINISHED.includes(transaction.status)) return transaction.status;
    await postCustodyEntries(em, [...lockReleases(transaction), ...(await replacementLockReleases(em, transaction))]);
    if (transaction.chain === 'bitcoin') await releaseOutputs(em, transaction.id, spentInputs);
    await supersedeReplacements(em, transaction);
    Object.assign(transaction, { status: 'failed', failedAt: new Date(), failureReason: reason, failureMessage: message });
    await announce(em, transaction, 'transaction.failed');
    return 'failed';
  });
}

/** A settled or failed send's replacements the chain did not mine: none will be followed again. */
async function supersedeReplacements(em: EntityManager, transaction: OutgoingTransaction): Promise<void> {
  await em.nativeUpdate(TransactionReplacement, { transaction: transaction.id, status: { $in: ['requested', 'broadcast'] } }, { status: 'superseded', updatedAt: new Date() });
}

/** The entries that take the send's lock off its ledger rows: of the asset sent, and of the native asset for the fee. */
function lockReleases(transaction: OutgoingTransaction): CustodyEntry[] {
  const native = nativeAssetOf(transaction);
  const releases =
    transaction.assetId === native.id
      ? [{ assetId: native.id, amount: BigInt(transaction.lockedAmount) + BigInt(transaction.lockedFee) }]
      : [
          { assetId: transaction.assetId, amount: BigInt(transaction.lockedAmount) },
          { assetId: native.id, amount: BigInt(transaction.lockedFee) },
        ];
  return releases.filter((release) => release.amount > 0n).map((release) => ({ ...custodyScope(transaction), assetId: release.assetId, kind: 'send_release', locked: -release.amount }));
}

/** The entries that take the extra fee each replacement locked off the ledger (under its own reference; one already released is skipped). */
async function replacementLockReleases(em: EntityManager, transaction: OutgoingTransaction): Promise<CustodyEntry[]> {
  const replacements = await em.find(TransactionReplacement, { transaction: transaction.id, lockedFee: { $ne: '0' } });
  return replacements.map((replacement) => replacementLockRelease(transaction, replacement));
}

/** The entry that takes a replacement's extra fee lock off the ledger. */
export const replacementLockRelease = (transaction: OutgoingTransaction, replacement: TransactionReplacement): CustodyEntry => ({
  ...replacementScope(transaction, replacement),
  assetId: nativeAssetOf(transaction).id,
  kind: 'send_release',
  locked: -BigInt(replacement.lockedFee),
});

/** A send's journal entries: its wallet, its sending address on account chains, the send as reference. */
export function custodyScope(transaction: OutgoingTransaction) {
  return {
    walletId: transaction.wallet.id,
    addressId: transaction.chain === 'bitcoin' ? null : transaction.fromAddress.id,
    reference: { type: 'transaction', id: transaction.id },
  };
}

/** A replacement's extra fee lock and its release: the send's wallet and address, the replacement as reference. */
export const replacementScope = (transaction: OutgoingTransaction, replacement: TransactionReplacement) => ({
  ...custodyScope(transaction),
  reference: { type: 'transaction_replacement', id: replacement.id },
});

export async function announce(em: EntityManager, transaction: OutgoingTransaction, type: EventType): Promise<void> {
  await em.flush();
  await emit(em, {
    organizationId: transaction.organization.id,
    environment: transaction.environment,
    type,
    data: await presentTransaction(em, transaction),
    dedupeKey: `${type}:${settlementOf(transaction)}`,
  });
}
