/**
 * Deposits, and spends the platform did not make, that a reorganisation took off the chain and that
 * the chain proves it will never carry again: the account that signed their transaction has another
 * transaction mined with its nonce, and the node has not mined theirs. Once that proof has held for
 * the chain's confirmation count of blocks (the tip at first proof is kept; a proof that stops holding
 * is forgotten), what they left in suspense is resolved:
 * - a reversed deposit's value goes back to the outside world, which never paid it
 *   (`suspense_written_off`), announced as `deposit.reversal_final`;
 * - an unexpected spend's debit returns to the address it was taken from (`reorg_returned`),
 *   announced as `wallet.unexpected_spend_returned`.
 * Chains without nonces are not proven here yet: Bitcoin (inputs spent by another transaction, which
 * would also unmake the outputs the spend made), Solana and Tron (references that expired).
 */
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ChainProvider } from '../chains/provider';
import { postCustodyEntry } from '../custody/journal';
import { emit } from '../events/service';
import { iso } from '../shared/time';
import { IncomingTransfer, OutgoingTransfer } from './entities';
import { presentAssetAmounts, presentOutgoingTransfer } from './outgoing';
import { presentDeposit, type ChainEnvironment } from './service';
import { closeReversedDeposit } from './suspense';

export interface NeverMinedDeps {
  em: () => EntityManager;
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
}

type Followed = IncomingTransfer | OutgoingTransfer;

/** Follows the proofs of every unresolved transfer a reorganisation left off the chain; answers those resolved in this pass. */
export async function resolveNeverMined(
  deps: NeverMinedDeps,
  provider: ChainProvider,
  scope: ChainEnvironment,
  confirmations: number,
): Promise<{ deposits: IncomingTransfer[]; spends: OutgoingTransfer[] }> {
  const resolved = { deposits: [] as IncomingTransfer[], spends: [] as OutgoingTransfer[] };
  if (!provider.nonces) return resolved;
  const em = deps.em();
  const unresolved = { neverMined: { lostAt: null, payerNonce: { $ne: null } }, reorganisations: { $gt: 0 }, chain: scope.chain, environment: scope.environment } as const;
  const deposits = await em.find(IncomingTransfer, { ...unresolved, status: 'dropped', wallet: { $ne: null } });
  const spends = await em.find(OutgoingTransfer, { ...unresolved, unexpected: true, blockHash: null });
  if (deposits.length === 0 && spends.length === 0) return resolved;
  const { height } = await provider.tip();
  const proofs = new Map<string, Promise<boolean>>();
  // One proof per transaction (its transfers share it): the node is asked before any transaction of the database opens.
  const provenLost = (row: Followed) => {
    let proof = proofs.get(row.txid);
    if (!proof) proofs.set(row.txid, (proof = nonceTakenByAnother(provider, row)));
    return proof;
  };
  const due = async <T extends Followed>(rows: T[]): Promise<T[]> => {
    const ready: T[] = [];
    for (const row of rows) {
      const proven = await provenLost(row);
      const seenAt = row.neverMined.lossSeenAtHeight;
      if (proven && seenAt != null) {
        if (height - seenAt >= confirmations) ready.push(row);
        continue;
      }
      const lossSeenAtHeight = proven ? height : null;
      if (seenAt === lossSeenAtHeight) continue;
      if (row instanceof IncomingTransfer) await em.nativeUpdate(IncomingTransfer, { id: row.id }, { neverMined: { lossSeenAtHeight } });
      else await em.nativeUpdate(OutgoingTransfer, { id: row.id }, { neverMined: { lossSeenAtHeight } });
    }
    return ready;
  };
  for (const deposit of await due(deposits)) if (await deps.transaction((tx) => writeOffReversedDeposit(tx, deposit.id))) resolved.deposits.push(deposit);
  const byTransaction = new Map<string, OutgoingTransfer[]>();
  for (const spend of await due(spends)) byTransaction.set(`${spend.wallet.id}:${spend.txid}`, [...(byTransaction.get(`${spend.wallet.id}:${spend.txid}`) ?? []), spend]);
  for (const group of byTransaction.values()) resolved.spends.push(...(await deps.transaction((tx) => returnLostSpend(tx, group.map((row) => row.id)))));
  return resolved;
}

/** The proof: the signer's next nonce at the tip is past the transaction's, and the node has not mined the transaction. */
async function nonceTakenByAnother(provider: ChainProvider, row: Followed): Promise<boolean> {
  const { confirmed } = await provider.nonces!(row.neverMined.payer!);
  if (confirmed <= BigInt(row.neverMined.payerNonce!)) return false;
  return (await provider.transactionStatus(row.txid)).state !== 'mined';
}

/** A reversed deposit proven never to come back: each round of it in suspense is written off; answers whether any was. */
async function writeOffReversedDeposit(em: EntityManager, id: string): Promise<boolean> {
  const row = await em.findOneOrFail(IncomingTransfer, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
  if (row.status !== 'dropped' || row.neverMined.lostAt) return false;
  row.neverMined.lostAt = new Date();
  const written = await closeReversedDeposit(em, row, 'never_mined');
  await em.flush();
  // A deposit dropped before it confirmed had nothing in suspense: it is only marked.
  if (!written) return false;
  await emit(em, {
    organizationId: row.organization.id,
    environment: row.environment,
    type: 'deposit.reversal_final',
    data: { ...presentDeposit(row), lost_at: iso(row.neverMined.lostAt) },
    dedupeKey: `deposit.reversal_final:${row.id}`,
  });
  return true;
}

/** An unexpected spend's transfers (one transaction, one wallet) proven never to be mined: what each debited returns to its address. */
async function returnLostSpend(em: EntityManager, ids: string[]): Promise<OutgoingTransfer[]> {
  const rows = (await em.find(OutgoingTransfer, { id: { $in: ids } }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true })).filter((row) => row.blockHash == null && !row.neverMined.lostAt);
  if (rows.length === 0) return [];
  const returned = new Map<string, bigint>();
  for (const row of rows) {
    const amount = BigInt(row.amount) + BigInt(row.fee);
    row.neverMined.lostAt = new Date();
    if (amount === 0n) continue;
    returned.set(row.assetId, (returned.get(row.assetId) ?? 0n) + amount);
    await postCustodyEntry(em, {
      walletId: row.wallet.id,
      addressId: row.chain === 'bitcoin' ? null : row.address.id,
      assetId: row.assetId,
      kind: 'reorg_returned',
      reference: { type: 'outgoing_transfer', id: `${row.id}#${row.reorganisations}` },
      balance: amount,
    });
  }
  await em.flush();
  const first = rows[0]!;
  await emit(em, {
    organizationId: first.organization.id,
    environment: first.environment,
    type: 'wallet.unexpected_spend_returned',
    data: {
      wallet_id: first.wallet.id,
      chain: first.chain,
      network: first.network,
      tx_hash: first.txid,
      returned: presentAssetAmounts(returned),
      transfers: rows.map(presentOutgoingTransfer),
      lost_at: iso(first.neverMined.lostAt!),
    },
    dedupeKey: `wallet.unexpected_spend_returned:${first.chain}:${first.txid}:${first.wallet.id}`,
  });
  return rows;
}
