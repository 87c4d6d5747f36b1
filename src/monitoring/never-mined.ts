/**
 * Deposits, and spends the platform did not make, that a reorganisation took off the chain and that
 * the chain proves it will never carry again, and the node has not mined: on Ethereum the account that
 * signed their transaction has another transaction mined with its nonce; on Solana the recent blockhash
 * their transaction names is no longer valid at the finalized state. Each proof is held for the
 * chain's confirmation count of blocks (the tip at first proof is kept; a proof that stops
 * holding is forgotten). Then what they left in suspense is resolved:
 * - a reversed deposit's value goes back to the outside world, which never paid it
 *   (`suspense_written_off`), announced as `deposit.reversal_final`;
 * - an unexpected spend's debit returns to the address it was taken from (`reorg_returned`),
 *   announced as `wallet.unexpected_spend_returned`.
 * On Bitcoin the proof is an output the transaction spends spent by another transaction: one of the
 * platform's outputs, seen by the scanner at the confirmation depth (spentByAnotherFinal); a
 * stranger's, as the node says, held for the confirmation count (inputSpentByAnother). Tron is not
 * followed: its only provider, the devnet, never reorganises.
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
import { openSuspenseItems } from '../ledger/suspense';

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
  const byConflict = scope.chain === 'bitcoin';
  if (!byConflict && !provider.nonces && !provider.blockhashExpired) return resolved;
  const em = deps.em();
  const unresolved = { neverMined: { lostAt: null }, reorganisations: { $gt: 0 }, chain: scope.chain, environment: scope.environment } as const;
  // Only reversed deposits with a round still in suspense: one dropped before it confirmed holds nothing to resolve.
  const held = new Set(
    (await openSuspenseItems(em, { environment: scope.environment })).filter((item) => item.reference.type === 'incoming_transfer').map((item) => item.reference.id.split('#')[0]!),
  );
  const deposits = held.size ? (await em.find(IncomingTransfer, { ...unresolved, status: 'dropped', wallet: { $ne: null }, id: { $in: [...held] } })) : [];
  const spends = await em.find(OutgoingTransfer, { ...unresolved, unexpected: true, blockHash: null });
  if (deposits.length === 0 && spends.length === 0) return resolved;
  let lost: Set<string>;
  if (byConflict) {
    lost = await spentByAnotherFinal(em, scope, confirmations, [...new Set([...deposits, ...spends].map((row) => row.txid))]);
    // A stranger's transaction paid the deposit: its inputs are no outputs of the platform's, so the node says whether another spend took one.
    const strangers = deposits.filter((row) => !lost.has(row.txid) && row.neverMined.spends?.length);
    if (strangers.length && provider.spentInChain) for (const txid of await proofsHeld(em, provider, confirmations, strangers, inputSpentByAnother)) lost.add(txid);
  } else {
    const provable = [...spends, ...deposits].filter((row) => row.neverMined.payerNonce != null || row.neverMined.recentBlockhash != null);
    lost = await proofsHeld(em, provider, confirmations, provable, lostOnAccountChain);
  }
  const byTransaction = new Map<string, OutgoingTransfer[]>();
  for (const spend of spends.filter((row) => lost.has(row.txid))) byTransaction.set(`${spend.wallet.id}:${spend.txid}`, [...(byTransaction.get(`${spend.wallet.id}:${spend.txid}`) ?? []), spend]);
  for (const group of byTransaction.values()) resolved.spends.push(...(await deps.transaction((tx) => returnLostSpend(tx, group.map((row) => row.id)))));
  for (const deposit of deposits.filter((row) => lost.has(row.txid))) if (await deps.transaction((tx) => writeOffReversedDeposit(tx, deposit.id))) resolved.deposits.push(deposit);
  return resolved;
}

/**
 * The transactions whose proof (`prove`, one call per transaction, asked of the node before any
 * database transaction opens) has held for `confirmations` blocks of the tip. Where it is first seen
 * the tip is kept on the transfer; where it no longer holds, forgotten.
 */
async function proofsHeld(em: EntityManager, provider: ChainProvider, confirmations: number, rows: Followed[], prove: (provider: ChainProvider, row: Followed) => Promise<boolean>): Promise<Set<string>> {
  const { height } = await provider.tip();
  const proofs = new Map<string, Promise<boolean>>();
  const held = new Set<string>();
  for (const row of rows) {
    if (!proofs.has(row.txid)) proofs.set(row.txid, prove(provider, row));
    const proven = await proofs.get(row.txid)!;
    const seenAt = row.neverMined.lossSeenAtHeight;
    if (proven && seenAt != null) {
      if (height - seenAt >= confirmations) held.add(row.txid);
      continue;
    }
    const lossSeenAtHeight = proven ? height : null;
    if (seenAt === lossSeenAtHeight) continue;
    if (row instanceof IncomingTransfer) await em.nativeUpdate(IncomingTransfer, { id: row.id }, { neverMined: { lossSeenAtHeight } });
    else await em.nativeUpdate(OutgoingTransfer, { id: row.id }, { neverMined: { lossSeenAtHeight } });
  }
  return held;
}

/**
 * UTXO chains, from what scanning recorded (no node call): the transactions among `txids` that spend
 * an output of a custody wallet which another transaction spends in a block the scanner holds, at
 * least `confirmations` deep below its cursor. An output is spent once: those can never be mined. A
 * deposit is proven so when the transaction carrying it is such a spend (the change of a spend made
 * outside the platform); one from a stranger's transaction spends no output the platform knows, and
 * waits.
 */
async function spentByAnotherFinal(em: EntityManager, scope: ChainEnvironment, confirmations: number, txids: string[]): Promise<Set<string>> {
  if (txids.length === 0) return new Set();
  const rows = await em.execute<{ txid: string }[]>(
    `select distinct s.txid from outgoing_transfers s
       join chain_scan_cursors cursor on cursor.chain = s.chain and cursor.environment = s.environment
      where s.chain = ? and s.environment = ? and s.txid in (${txids.map(() => '?').join(', ')})
        and exists (select 1 from outgoing_transfers c
                     join scanned_blocks b on b.chain = c.chain and b.environment = c.environment and b.height = c.block_height and b.hash = c.block_hash
                    where c.chain = s.chain and c.environment = s.environment and c.position = s.position and c.txid <> s.txid
                      and cursor.height - c.block_height + 1 >= ?)`,
    [scope.chain, scope.environment, ...txids, confirmations],
  );
  return new Set(rows.map((row) => row.txid));
}

/** Bitcoin: an output the transaction spends is spent on the chain, and the node has not mined the transaction (another did). */
async function inputSpentByAnother(provider: ChainProvider, row: Followed): Promise<boolean> {
  for (const outpoint of row.neverMined.spends ?? []) {
    const [txid, vout] = outpoint.split(':');
    if (await provider.spentInChain!({ txid: txid!, vout: Number(vout) })) return (await provider.transactionStatus(row.txid)).state !== 'mined';
  }
  return false;
}

/**
 * Account chains: the signer's next nonce at the tip is past the transaction's (Ethereum), or its
 * recent blockhash expired at the finalized state (Solana); and the node has not mined the transaction.
 */
async function lostOnAccountChain(provider: ChainProvider, row: Followed): Promise<boolean> {
  const { payer, payerNonce, recentBlockhash } = row.neverMined;
  if (payerNonce != null && provider.nonces) {
    if ((await provider.nonces(payer!)).confirmed <= BigInt(payerNonce)) return false;
  } else if (recentBlockhash != null && provider.blockhashExpired) {
    if (!(await provider.blockhashExpired(recentBlockhash))) return false;
  } else return false;
  return (await provider.transactionStatus(row.txid)).state !== 'mined';
}

/** A reversed deposit proven never to come back: each round of it in suspense is written off; answers whether any was. */
async function writeOffReversedDeposit(em: EntityManager, id: string): Promise<boolean> {
  const row = await em.findOneOrFail(IncomingTransfer, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
  if (row.status !== 'dropped' || row.neverMined.lostAt) return false;
  row.neverMined.lostAt = new Date();
  const written = await closeReversedDeposit(em, row, 'never_mined');
  await em.flush();
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
  if (rows[0]!.chain === 'bitcoin') await unspendOutputsOf(em, rows);
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

/** Bitcoin: the outputs the lost spend had spent that no other transaction spends are the wallet's to spend again. */
async function unspendOutputsOf(em: EntityManager, rows: OutgoingTransfer[]): Promise<void> {
  for (const row of rows) {
    const [txid, vout] = row.position.slice('in:'.length).split(':');
    await em.execute(
      `update wallet_outputs set status = 'available', updated_at = now() where environment = ? and txid = ? and vout = ? and status = 'spent'
          and not exists (select 1 from outgoing_transfers c where c.chain = ? and c.environment = ? and c.position = ? and c.txid <> ? and c.block_hash is not null)`,
      [row.environment, txid, Number(vout), row.chain, row.environment, row.position, row.txid],
    );
  }
}
