/**
 * A send failed (its lock released, nothing debited) whose bytes a block mined after all: the proof it
 * failed on was wrong, or a node kept bytes it had refused. The chain is the truth: scanning debits the
 * wallet what the block shows left it (src/monitoring/outgoing.ts, as for any spend the ledger did not
 * expect: on Bitcoin the whole inputs, the change coming back as a deposit), and the send is settled as
 * mined here, loudly: `transaction.mined_after_failure`, an error log and the
 * `transactions_mined_after_failure` metric.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { emit } from '../events/service';
import { toDisplay } from '../shared/money';
import { assetById } from '../catalogue/service';
import { OutgoingTransaction, TransactionReplacement } from './entities';
import { candidatesOf, lockedRow, markMinedCandidate } from './lifecycle';
import { nativeAssetOf, presentTransaction } from './presenters';

/** A send failed without being mined: its bytes mined later are debited by scanning and alarm. */
export const FAILED_UNMINED = { status: 'failed', failureReason: { $nin: ['reverted', 'cancelled'] } } as const;

/** What scanning debited for one late-mined send, per asset, in base units. */
export type LateDebits = Map<string, bigint>;

/**
 * Records that failed send `transactionId` was mined as `txid` in `block`, once (a block seen again
 * changes nothing): the candidate mined, the block, status `confirmed` (what the chain did), its
 * failure cleared but `failed_at` kept, `mined_after_failure_at` now, its fee (account chains: what
 * scanning saw it pay; Bitcoin: what the candidate was signed with). Answers whether it was recorded now.
 */
export async function recordMinedAfterFailure(
  em: EntityManager,
  transactionId: string,
  txid: string,
  block: { height: number; hash: string },
  debits: LateDebits,
): Promise<boolean> {
  const row = await lockedRow(em, transactionId);
  if (row.minedAfterFailureAt != null || row.status !== 'failed') return false;
  const candidate = (await candidatesOf(em, row)).find((one) => one.txHash === txid);
  if (!candidate) throw new Error(`transaction ${row.id} was mined as ${txid}, none of its candidates`);
  const failure = { reason: row.failureReason ?? null, message: row.failureMessage ?? null, failed_at: row.failedAt?.toISOString() ?? null };
  await markMinedCandidate(em, row, candidate);
  const native = nativeAssetOf(row);
  // The native debit of an account chain's send is its fee, and its amount when the asset is native.
  const accountFee = (debits.get(native.id) ?? 0n) - (row.assetId === native.id ? BigInt(candidate.recipientAmount) : 0n);
  Object.assign(row, {
    status: 'confirmed',
    blockHeight: block.height,
    blockHash: block.hash,
    fee: candidate.feeTerms.model === 'per_byte' ? candidate.feeLimit : accountFee.toString(),
    confirmedAt: new Date(),
    minedAfterFailureAt: new Date(),
    failureReason: null,
    failureMessage: null,
  });
  await em.flush();
  await emit(em, {
    organizationId: row.organization.id,
    environment: row.environment,
    type: 'transaction.mined_after_failure',
    data: {
      ...(await presentTransaction(em, row)),
      failure,
      debits: [...debits].map(([assetId, amount]) => ({ asset_id: assetId, amount: toDisplay(amount, assetById(assetId).decimals), amount_raw: amount.toString() })),
    },
    dedupeKey: `transaction.mined_after_failure:${row.id}`,
  });
  return true;
}

/** Of these transaction hashes, those of a send failed without being mined (its own or a replacement's): the send's id by hash. */
export async function failedUnminedByHash(em: EntityManager, scope: Pick<OutgoingTransaction, 'chain' | 'environment'>, hashes: string[]): Promise<Map<string, string>> {
  const sends = await em.find(OutgoingTransaction, { chain: scope.chain, environment: scope.environment, txHash: { $in: hashes }, ...FAILED_UNMINED }, { fields: ['id', 'txHash'] });
  const replacements = await em.find(
    TransactionReplacement,
    { environment: scope.environment, txHash: { $in: hashes }, transaction: { chain: scope.chain, ...FAILED_UNMINED } },
    { fields: ['txHash', 'transaction'] },
  );
  return new Map([...sends.map((send) => [send.txHash!, send.id] as const), ...replacements.map((replacement) => [replacement.txHash!, replacement.transaction.id] as const)]);
}
