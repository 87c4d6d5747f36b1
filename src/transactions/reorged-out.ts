/**
 * A settled send a reorganisation took off the chain that the chain will never mine again: another
 * transaction consumed its nonce (or spent its inputs) and none of its candidates is known to the
 * node. Once that proof has held for the send's confirmation count of blocks, what it had paid (the
 * amount and the fee, waiting in suspense since the reorganisation) returns to the wallet, and the
 * send is `failed` with `reorged_out`; on Bitcoin its change is unmade and its inputs the conflict did
 * not spend are spendable again (not while a later send holds the change).
 */
import type { ChainProvider } from '../chains/provider';
import { postCustodyEntries } from '../custody/journal';
import { proofOfLoss } from './broadcasting';
import { OutgoingTransaction } from './entities';
import { FINISHED, lockedRow, minedCandidateOf, type LifecycleDeps } from './lifecycle';
import { announce, custodyScope, debitsOf, settlementOf } from './settlement';
import { unsettleOutputs } from './wallet-outputs';

/** A send mined after it had failed was debited by scanning: its outgoing transfers carry its loss (src/monitoring/never-mined.ts). */
const PROVABLE = (transaction: OutgoingTransaction) => transaction.minedAfterFailureAt == null;

/**
 * Follows the unplaced settled sends no candidate of which is mined: records where their loss was
 * first proven, forgets it when the proof no longer holds, and returns those proven for long enough.
 * Answers the sends returned.
 */
export async function returnReorgedOut(deps: Pick<LifecycleDeps, 'em' | 'transaction'>, provider: ChainProvider, sends: OutgoingTransaction[]): Promise<OutgoingTransaction[]> {
  const returned: OutgoingTransaction[] = [];
  for (const unplaced of sends.filter(PROVABLE)) {
    const send = await deps.em().findOneOrFail(OutgoingTransaction, { id: unplaced.id }, { populate: ['fromAddress'] });
    const proof = await proofOfLoss(deps, provider, send);
    const { height } = await provider.tip();
    if (!proof || send.lossSeenAtHeight == null) {
      await deps.em().nativeUpdate(OutgoingTransaction, { id: send.id }, { lossSeenAtHeight: proof ? height : null });
      continue;
    }
    if (height - send.lossSeenAtHeight < send.requiredConfirmations) continue;
    const done = await deps.transaction(async (em) => {
      const transaction = await lockedRow(em, send.id);
      if (transaction.blockHash != null || !FINISHED.includes(transaction.status) || transaction.failureReason === 'reorged_out') return false;
      // Bitcoin: its change is unmade and its inputs spendable again, unless a later send already holds the change.
      if (transaction.chain === 'bitcoin' && !(await unsettleOutputs(em, transaction.id, proof.spentInputs ?? []))) return false;
      const reference = { type: 'transaction', id: settlementOf(transaction) };
      // One entry per asset (a native send's amount and fee are one): the kind and reference make its key.
      const paid = new Map<string, bigint>();
      for (const debit of debitsOf(transaction, await minedCandidateOf(em, transaction))) paid.set(debit.assetId, (paid.get(debit.assetId) ?? 0n) + debit.amount);
      const returns = [...paid].filter(([, amount]) => amount !== 0n);
      await postCustodyEntries(em, returns.map(([assetId, amount]) => ({ ...custodyScope(transaction), reference, assetId, kind: 'reorg_returned', balance: amount })));
      Object.assign(transaction, {
        status: 'failed',
        failedAt: new Date(),
        confirmedAt: null,
        failureReason: 'reorged_out',
        failureMessage: `The block this send was settled in was abandoned by a reorganisation, and it can never be mined again: ${proof.message} What it had paid is back in the wallet.`,
      });
      await announce(em, transaction, 'transaction.failed');
      return true;
    });
    if (done) returned.push(send);
  }
  return returned;
}
