/**
 * What a reorganisation deeper than the confirmation count does to deposits and to spends the
 * platform did not make: their value waits in the ledger's suspense (src/ledger/suspense.ts) until the
 * chain mines them again; and a reversed deposit the wallet had already spent opens an `overdrawn`
 * drift with `ledger.drift`, never a silent negative balance.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { Wallet } from '../custody/entities';
import type { Logger } from '../logger';
import { enterSuspense, leaveSuspense, type SuspenseItem } from '../ledger/suspense';
import { IncomingTransfer, LedgerDrift, OutgoingTransfer } from './entities';
import { judgeFigure, overdrawnFigure } from './drifts';

/** One round of a deposit's reversal, or of an unexpected spend's loss of its block: its value, in suspense. */
const roundItem = (row: IncomingTransfer | OutgoingTransfer, type: 'incoming_transfer' | 'outgoing_transfer', round: number, amount: bigint): SuspenseItem => ({
  organizationId: row.organization.id,
  environment: row.environment,
  reference: { type, id: `${row.id}#${round}` },
  assetId: row.assetId,
  counterparty: 'world',
  amount,
});

/** A confirmed deposit reversed (its round `row.reorganisations`, before it is counted): the credit handed back to the world waits in suspense instead. */
export const holdReversedDeposit = (em: EntityManager, row: IncomingTransfer) => enterSuspense(em, roundItem(row, 'incoming_transfer', row.reorganisations, BigInt(row.amount)));

/**
 * The deposit's fate is proven: confirmed again (`mined_again`), every earlier round reversed into
 * suspense is the same value and leaves it; never to be mined (`never_mined`, src/monitoring/never-mined.ts),
 * each is written off to the outside world. Answers whether any round was open.
 */
export async function closeReversedDeposit(em: EntityManager, row: IncomingTransfer, proof: 'mined_again' | 'never_mined'): Promise<boolean> {
  let closed = false;
  for (let round = 0; round < row.reorganisations; round += 1) closed = (await leaveSuspense(em, roundItem(row, 'incoming_transfer', round, BigInt(row.amount)), proof)) || closed;
  return closed;
}

/** What an unexpected spend took from custody: the amount and, on its native row, the fee. */
const spent = (row: OutgoingTransfer) => BigInt(row.amount) + BigInt(row.fee);

/**
 * A reorganisation replaced the blocks above `forkHeight`: the outgoing transfers recorded in them lose
 * their block until a block of the new chain carries them (recordOutgoing places them again). What an
 * unexpected one had debited waits in suspense meanwhile: the wallet stays debited, since the same
 * bytes are most likely mined again.
 */
export async function unplaceOutgoingTransfers(em: EntityManager, scope: Pick<OutgoingTransfer, 'chain' | 'environment'>, forkHeight: number): Promise<OutgoingTransfer[]> {
  const rows = await em.find(OutgoingTransfer, { chain: scope.chain, environment: scope.environment, blockHeight: { $gt: forkHeight } }, { refresh: true });
  for (const row of rows) {
    Object.assign(row, { blockHeight: null, blockHash: null });
    row.reorganisations += 1;
    if (row.unexpected && spent(row) > 0n) await enterSuspense(em, roundItem(row, 'outgoing_transfer', row.reorganisations, spent(row)));
  }
  await em.flush();
  return rows;
}

/** An unexpected spend seen again in a block of the new chain: its round in suspense is proven, and leaves it. */
export async function releaseReplacedSpend(em: EntityManager, row: OutgoingTransfer): Promise<void> {
  await leaveSuspense(em, roundItem(row, 'outgoing_transfer', row.reorganisations, spent(row)));
}

/**
 * The available balance (balance less locks) of the deposit's holder after a reversal or a credit
 * again: below zero, an `overdrawn` drift is opened (`ledger.drift`, once) or its figure updated; at
 * zero or more, an unresolved one is resolved. The reconciliation judges the same figure each pass.
 */
export async function reviewOverdrawn(em: EntityManager, log: Logger, row: IncomingTransfer): Promise<void> {
  if (!row.wallet) return;
  const addressId = row.chain === 'bitcoin' ? null : row.address!.id;
  const [booked] = await em.execute<{ available: string }[]>(
    addressId
      ? `select (balance - locked)::text as available from address_balances where address_id = ? and asset_id = ?`
      : `select (balance - locked)::text as available from wallet_balances where wallet_id = ? and asset_id = ?`,
    [addressId ?? row.wallet.id, row.assetId],
  );
  const available = BigInt(booked?.available ?? '0');
  const drift = await em.findOne(LedgerDrift, { wallet: row.wallet.id, address: addressId, assetId: row.assetId, figure: 'overdrawn', status: { $in: ['suspected', 'open'] } });
  if (available >= 0n && !drift) return;
  const wallet = await em.findOneOrFail(Wallet, { id: row.wallet.id });
  await judgeFigure({ em, log, wallet, position: { walletId: wallet.id, addressId, assetId: row.assetId } }, 'overdrawn', overdrawnFigure(available), 0n, drift);
}
