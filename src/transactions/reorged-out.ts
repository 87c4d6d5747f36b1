/**
 * A settled send a reorganisation took off the chain that the chain will never mine again: another
 * transaction consumed its nonce (or spent its inputs) and none of its candidates is known to the
 * node. Once that proof has held for the send's confirmation count of blocks, what it had paid (the
 * amount and the fee, waiting in suspense since the reorganisation) returns to the wallet, and the
 * send is `failed` with `reorged_out`; on Bitcoin its change is unmade and its inputs the conflict did
 * not spend are spendable again. The settled sends that spent that change (and theirs) can never be
 * mined either: they return with it, in the same transaction; while one is still under way it waits
 * (that send fails on the same proof, src/transactions/broadcasting.ts changeOfLostSend).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
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
    // A settled send that spent the change of a lost one returns with it (below), not on its own.
    const found = await proofOfLoss(deps, provider, send);
    const proof = found?.changeOf ? null : found;
    const { height } = await provider.tip();
    if (!proof || send.lossSeenAtHeight == null) {
      await deps.em().nativeUpdate(OutgoingTransaction, { id: send.id }, { lossSeenAtHeight: proof ? height : null });
      continue;
    }
    if (height - send.lossSeenAtHeight < send.requiredConfirmations) continue;
    const done = await deps.transaction(async (em) => {
      const transaction = await lockedRow(em, send.id);
      if (!settledUnplaced(transaction)) return [];
      const spenders: OutgoingTransaction[] = [];
      if (transaction.chain === 'bitcoin') {
        for (const id of await spendersOfChange(em, transaction.id)) {
          const spender = await lockedRow(em, id);
          if (spender.status === 'failed') continue; // it released what it held
          if (!settledUnplaced(spender)) return []; // still under way: it fails on the same proof first
          spenders.push(spender);
        }
      }
      for (const spender of spenders) {
        await returnSend(em, spender, [], `Its input is the change of send ${transaction.id}, which can never be mined: ${proof.message}`);
      }
      await returnSend(em, transaction, proof.spentInputs ?? [], proof.message);
      return [transaction, ...spenders];
    });
    returned.push(...done);
  }
  return returned;
}

/** Settled (its amount and fee debited) and in no block of the chain: what a reorganisation leaves of a send. */
const settledUnplaced = (transaction: OutgoingTransaction) => transaction.blockHash == null && FINISHED.includes(transaction.status) && transaction.failureReason !== 'reorged_out';

/**
 * Bitcoin: the sends that spent (or hold) the change of `transactionId`, and those that spent theirs,
 * deepest first: none of them can be mined without it.
 */
async function spendersOfChange(em: EntityManager, transactionId: string): Promise<string[]> {
  const rows = await em.execute<{ id: string }[]>(
    `with recursive spender(id, depth) as (
       select spent_by_id, 1 from wallet_outputs where created_by_id = ? and spent_by_id is not null
       union
       select o.spent_by_id, s.depth + 1 from wallet_outputs o join spender s on o.created_by_id = s.id where o.spent_by_id is not null
     ) select id from spender group by id order by max(depth) desc, id`,
    [transactionId],
  );
  return rows.map((row) => row.id);
}

/**
 * `failed` with `reorged_out`: what it paid (the amount and the fee, in suspense since the
 * reorganisation) back in the wallet; on Bitcoin its change unmade and its inputs spendable again save
 * `spentElsewhere`. A send still holding its change here lost a race with a new one: the caller's
 * transaction is rolled back and the next pass tries again.
 */
async function returnSend(em: EntityManager, transaction: OutgoingTransaction, spentElsewhere: string[], why: string): Promise<void> {
  if (transaction.chain === 'bitcoin' && !(await unsettleOutputs(em, transaction.id, spentElsewhere))) {
    throw new Error(`send ${transaction.id}: its change was taken by a new send while it was returned; tried again next pass`);
  }
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
    failureMessage: `The block this send was settled in was abandoned by a reorganisation, and it can never be mined again: ${why} What it had paid is back in the wallet.`,
  });
  await announce(em, transaction, 'transaction.failed');
}
