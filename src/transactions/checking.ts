/**
 * The check step of a send: where it stands on the chain (mined, pending or missing) across its
 * replacements, recorded as confirming once mined, and whether a fee bump is due.
 */
import type { ChainProvider } from '../chains/provider';
import { OutgoingTransaction, TransactionReplacement } from './entities';
import { candidatesOf, FINISHED, lockedRow, providerOf, REPLACEABLE_CHAINS, type Candidate, type LifecycleDeps, type StepOutcome } from './lifecycle';
import { markBroadcast, proofOfLoss } from './broadcasting';
import { announce, minedOutcome } from './settlement';

/**
 * Where the signed transaction stands, asked for every candidate (the original and its
 * replacements): `settle` once one is mined at the confirmation count (also when it ran and
 * reverted: its fee was paid), `waiting` while pending or short of it, `missing` when the node
 * knows none (dropped, or reorganised out): the workflow broadcasts the newest again. `replace`
 * instead of `waiting` or `missing` when a replacement waits to be signed and broadcast.
 */
export async function checkTransaction(deps: LifecycleDeps, transactionId: string): Promise<StepOutcome> {
  const em = deps.em();
  const transaction = await em.findOneOrFail(OutgoingTransaction, { id: transactionId });
  if (FINISHED.includes(transaction.status)) return transaction.status;
  const provider = await providerOf(deps, transaction);
  let pending = false;
  let mined: { candidate: Candidate; status: Extract<Awaited<ReturnType<ChainProvider['transactionStatus']>>, { state: 'mined' }> } | null = null;
  for (const candidate of await candidatesOf(em, transaction)) {
    const status = await provider.transactionStatus(candidate.txHash);
    if (status.state === 'mined') {
      mined = { candidate, status };
      break;
    }
    if (status.state === 'pending') pending = true;
  }
  if (!mined && !pending) {
    if (transaction.status === 'confirming') {
      await deps.transaction(async (tx) => {
        const row = await lockedRow(tx, transactionId);
        if (row.status !== 'confirming') return;
        Object.assign(row, { status: 'broadcast', blockHeight: null, blockHash: null, confirmations: 0 });
      });
    }
    // A send the node dropped (evicted under a fee spike) is bumped as one it holds, unless it is proven
    // lost (its nonce consumed, its inputs spent by a conflict): the rebroadcast's refusal then fails it.
    if (transaction.status === 'signed' || !(await replacementDue(deps, provider, transaction))) return 'missing';
    await em.populate(transaction, ['fromAddress']);
    return (await proofOfLoss(deps, provider, transaction)) ? 'missing' : 'replace';
  }
  if (!mined) {
    if (transaction.status === 'signed') await markBroadcast(deps, transactionId);
    return (await replacementDue(deps, provider, transaction)) ? 'replace' : 'waiting';
  }
  const { candidate, status } = mined;
  await deps.transaction(async (tx) => {
    const row = await lockedRow(tx, transactionId);
    if (FINISHED.includes(row.status)) return;
    if (row.status === 'signed') {
      Object.assign(row, { status: 'broadcast', broadcastAt: row.broadcastAt ?? new Date() });
      await announce(tx, row, 'transaction.broadcast');
    }
    if (candidate.replacement && row.txHash !== candidate.txHash) settleOnReplacement(row, await tx.findOneOrFail(TransactionReplacement, { id: candidate.replacement.id }));
    Object.assign(row, { status: 'confirming', blockHeight: status.blockHeight, blockHash: status.blockHash, confirmations: status.confirmations });
    if (status.fee !== null) row.fee = status.fee.toString();
    // Mined again after a reorganisation, the outcome is the new block's: a failure an abandoned block recorded is cleared.
    row.failureReason = minedOutcome(status.succeeded, candidate.replacement?.kind === 'cancel');
  });
  return status.confirmations >= transaction.requiredConfirmations ? 'settle' : 'waiting';
}

/**
 * The send follows the replacement the chain mined: its hash, bytes and fee terms become the
 * send's, and what the recipient gets is the replacement's (nothing for a cancel, whose outcome
 * `cancelled` checkTransaction records).
 */
function settleOnReplacement(row: OutgoingTransaction, replacement: TransactionReplacement): void {
  Object.assign(row, {
    txHash: replacement.txHash,
    signedTransaction: replacement.signedTransaction,
    feeTerms: replacement.feeTerms,
    feeLimit: replacement.feeLimit,
    recipientAmount: replacement.recipientAmount,
    // A Bitcoin transaction pays exactly the fee it was signed with.
    ...(replacement.feeTerms.model === 'per_byte' ? { fee: replacement.feeLimit } : {}),
  });
  replacement.status = 'mined';
}

/**
 * Whether an unmined send should be replaced now: a replacement was asked for, or (Ethereum or
 * Bitcoin, not sponsored, FEE_BUMP_AFTER_BLOCKS set) FEE_BUMP_AFTER_BLOCKS blocks passed since its latest
 * candidate was first seen unmined (waiting, or dropped). That height is recorded here the first time.
 */
async function replacementDue(deps: LifecycleDeps, provider: ChainProvider, transaction: OutgoingTransaction): Promise<boolean> {
  const em = deps.em();
  if ((await em.count(TransactionReplacement, { transaction: transaction.id, status: 'requested' })) > 0) return true;
  const after = deps.config.FEE_BUMP_AFTER_BLOCKS;
  if (after === 0 || !REPLACEABLE_CHAINS.includes(transaction.chain) || transaction.sponsorshipId != null) return false;
  const { height } = await provider.tip();
  if (transaction.waitingSinceHeight == null) {
    await em.nativeUpdate(OutgoingTransaction, { id: transaction.id, waitingSinceHeight: null }, { waitingSinceHeight: height });
    return false;
  }
  return height - transaction.waitingSinceHeight >= after;
}
