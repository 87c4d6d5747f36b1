/**
 * The check step of a send: where it stands on the chain (mined, pending or missing) across its
 * replacements, recorded as confirming once mined, and whether a fee bump is due.
 */
import type { ChainProvider } from '../chains/provider';
import { OutgoingTransaction, TransactionReplacement, WalletOutput } from './entities';
import { candidatesOf, FINISHED, lockedRow, markMinedCandidate, minedFee, providerOf, REPLACEABLE_CHAINS, type Candidate, type LifecycleDeps, type StepOutcome } from './lifecycle';
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
    if (transaction.status === 'confirming') await unmine(deps, transactionId);
    // A send the node dropped (evicted under a fee spike) is bumped as one it holds, unless it is proven
    // lost (its nonce consumed, its inputs spent by a conflict): the rebroadcast's refusal then fails it.
    if (transaction.status === 'signed' || !(await replacementDue(deps, provider, transaction))) return 'missing';
    await em.populate(transaction, ['fromAddress']);
    return (await proofOfLoss(deps, provider, transaction)) ? 'missing' : 'replace';
  }
  if (!mined) {
    if (transaction.status === 'confirming') await unmine(deps, transactionId);
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
    await markMinedCandidate(tx, row, candidate);
    Object.assign(row, { status: 'confirming', blockHeight: status.blockHeight, blockHash: status.blockHash, confirmations: status.confirmations });
    row.fee = minedFee(row, candidate, status.fee);
    // Mined again after a reorganisation, the outcome is the new block's: a failure an abandoned block recorded is cleared.
    row.failureReason = minedOutcome(status.succeeded, candidate.replacement?.kind === 'cancel');
  });
  if (status.confirmations < transaction.requiredConfirmations) return 'waiting';
  // Nothing is released before every other candidate is proven dead: the mined one, at the confirmation count, consumed their nonce or inputs.
  await em.populate(transaction, ['fromAddress']);
  return (await othersDead(deps, provider, transaction, candidate)) ? 'settle' : 'waiting';
}

/** The block that mined a confirming send left the chain and no candidate is mined now: it waits (and is followed) as broadcast again. */
async function unmine(deps: LifecycleDeps, transactionId: string): Promise<void> {
  await deps.transaction(async (tx) => {
    const row = await lockedRow(tx, transactionId);
    if (row.status !== 'confirming') return;
    Object.assign(row, { status: 'broadcast', blockHeight: null, blockHash: null, confirmations: 0, minedTxHash: null });
    await tx.nativeUpdate(TransactionReplacement, { transaction: row.id, status: 'mined' }, { status: 'broadcast', updatedAt: new Date() });
  });
}

/**
 * Whether every candidate but the mined one is proven dead, read after it: none of them mined, and the
 * send's nonce consumed (account chains) or its inputs spent in the chain (Bitcoin; every candidate
 * spends the same ones). The mined candidate, at the confirmation count, does both, so this fails only
 * when the chain moved under the check: the send then waits a check.
 */
async function othersDead(deps: LifecycleDeps, provider: ChainProvider, transaction: OutgoingTransaction, mined: Candidate): Promise<boolean> {
  const others = (await candidatesOf(deps.em(), transaction)).filter((candidate) => candidate.txHash !== mined.txHash);
  if (others.length === 0) return true;
  for (const other of others) if ((await provider.transactionStatus(other.txHash)).state === 'mined') return false;
  if (provider.nonces && transaction.nonce != null) return (await provider.nonces(transaction.fromAddress.address)).confirmed > BigInt(transaction.nonce);
  if (provider.spentInChain) {
    const inputs = await deps.em().find(WalletOutput, { spentBy: transaction.id });
    for (const input of inputs) if (!(await provider.spentInChain({ txid: input.txid, vout: input.vout }))) return false;
  }
  return true;
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
