import type { EntityManager } from '@mikro-orm/postgresql';
import type { ChainProvider, ChainTip, Outpoint } from '../chains/provider';
import type { PinnedPosition } from './ledger-check';
import type { ChainEnvironment } from './service';

/** An output of a Bitcoin wallet the platform's UTXO table (wallet_outputs) says is unspent on the chain at the pinned block. */
export interface TableOutput extends Outpoint {
  walletId: string;
  amount: bigint;
}

/**
 * The outputs of `walletIds` the UTXO table says the chain holds unspent at block `pin` (at or below
 * the scanner's cursor, read in one snapshot with it), by status:
 * - `available`: unspent, unless it is the change of a settled send the chain does not carry at the
 *   pin (its block lost to a reorganisation, or above the pin): that change is not there yet;
 * - `locked` (a send in flight holds it): unspent until a transaction the scanner saw at or below the
 *   pin spends it (the send's own candidate, or a spend the platform did not make);
 * - `unconfirmed`: on the chain once the transaction paying it was seen at or below the pin (a
 *   deposit mined, not yet confirmed; the change of the send's candidate mined), never while only in
 *   the mempool;
 * - `spent`: unspent again when what spent it is off the chain at the pin (a settled send or an
 *   unexpected spend a reorganisation took away, in suspense).
 * Each term mirrors one of ledgerViewAt's (src/monitoring/ledger-check.ts), so where the table and the
 * ledger agree, these outputs sum to the ledger's `onChain` figure of the wallet's BTC.
 */
export async function tableOutputsAt(em: EntityManager, scope: ChainEnvironment, walletIds: string[], pin: Pick<ChainTip, 'height'>): Promise<TableOutput[]> {
  if (walletIds.length === 0) return [];
  // What the scanner recorded at or below the pin on a block it still holds (outgoing transfers lose their block in a reorganisation).
  const seenSpending = (condition: string) =>
    `exists (select 1 from outgoing_transfers s where s.wallet_id = o.wallet_id and s.chain = 'bitcoin' and s.environment = o.environment and ${condition}
       and s.block_height <= pin.height
       and not exists (select 1 from scanned_blocks b where b.chain = s.chain and b.environment = s.environment and b.height = s.block_height and b.hash <> s.block_hash))`;
  const offChain = `(t.block_hash is null or t.block_height > pin.height)`;
  const list = walletIds.map(() => '?').join(', ');
  // Spent outputs are the wallets' whole history: the few spends off the chain are found once (a hashed
  // subplan), the spending sends by primary key, never a scan of the wallets' transfers per output.
  const rows = await em.execute<{ wallet_id: string; txid: string; vout: number; amount: string }[]>(
    `with pin as (select ?::bigint as height),
     unexpected_off_chain as (
       select s.position from outgoing_transfers s, pin
        where s.wallet_id in (${list}) and s.chain = 'bitcoin' and s.environment = ? and s.unexpected and s.lost_at is null and (s.block_height is null or s.block_height > pin.height)
          -- another transaction the scanner saw at or below the pin spent the output instead (the lost spend awaits its proof)
          and not exists (select 1 from outgoing_transfers c where c.chain = s.chain and c.environment = s.environment and c.position = s.position and c.txid <> s.txid
                            and c.block_height <= pin.height))
     select o.wallet_id, o.txid, o.vout, o.amount::text as amount
       from wallet_outputs o, pin
      where o.environment = ? and o.wallet_id in (${list})
        and case o.status
          when 'available' then not exists (select 1 from transactions t where t.id = o.created_by_id and ${offChain})
          when 'locked' then not ${seenSpending(`s.position = 'in:' || o.txid || ':' || o.vout`)}
          when 'unconfirmed' then ${seenSpending(`s.transaction_id = o.created_by_id and s.txid = o.txid`)}
            or exists (select 1 from incoming_transfers i where i.wallet_id = o.wallet_id and i.chain = 'bitcoin' and i.environment = o.environment
                         and i.txid = o.txid and i.position = 'out:' || o.vout and i.status = 'pending' and i.block_height <= pin.height)
          when 'spent' then (exists (select 1 from transactions t where t.id = o.spent_by_id and t.mined_after_failure_at is null
                                      and (t.status = 'confirmed' or (t.status = 'failed' and t.failure_reason = 'reverted')) and ${offChain})
              -- unless another transaction the scanner saw at or below the pin spent it instead (the send awaits its proof of loss)
              and not ${seenSpending(`s.position = 'in:' || o.txid || ':' || o.vout and s.transaction_id is distinct from o.spent_by_id`)})
            or 'in:' || o.txid || ':' || o.vout in (select position from unexpected_off_chain)
          else false end
      order by o.wallet_id, o.txid, o.vout`,
    [pin.height, ...walletIds, scope.environment, scope.environment, ...walletIds],
  );
  return rows.map((row) => ({ walletId: row.wallet_id, txid: row.txid, vout: row.vout, amount: BigInt(row.amount) }));
}

/** One wallet's UTXO set at the pinned block: what the table says it holds unspent, and what the node holds of those outputs. */
export interface UtxoSet {
  table: bigint;
  chain: bigint;
}

/** The node's answers at the pin, per BTC position: each wallet's UTXO set and the outputs where the node disagrees with the table. */
export interface UtxoComparison {
  /** Per position (the positions' order): what the node holds of the table's outputs; 0 for other assets. */
  chainAmounts: bigint[];
  /** Per position: the wallet's UTXO set (null for positions of other assets). */
  utxoSets: (UtxoSet | null)[];
  /** The outputs the table counts that the node has spent, never saw mined, or holds another amount of. */
  differing: (TableOutput & { onChain: bigint | null })[];
}

/**
 * Every output the table says is unspent at the pin, checked with the node at the pin (gettxout,
 * batched: unspentOutputsAt); null when the node was not at the pin. A wallet's `balance` figure is
 * then the ledger against what the node holds of those outputs, and its `utxo_set` figure the table
 * against the same: together they close ledger = table = chain without an address index. What they
 * cannot see is an output the table never recorded (a deposit the scanner missed); finding those needs
 * the addresses' whole history (btcd's address index) or a scan of the UTXO set (Core's scantxoutset), which
 * are neither pinned nor available on every node (docs/monitoring.md).
 */
export async function compareUtxoSets(
  unspentAt: NonNullable<ChainProvider['unspentOutputsAt']>,
  positions: PinnedPosition[],
  outputs: TableOutput[],
  nativeAssetId: string,
  pin: ChainTip,
): Promise<UtxoComparison | null> {
  const held = outputs.length ? await unspentAt(outputs, pin) : [];
  if (!held) return null;
  const differing = outputs.flatMap((output, index) => (held[index] === output.amount ? [] : [{ ...output, onChain: held[index] ?? null }]));
  const utxoSets = positions.map((position) => {
    if (position.assetId !== nativeAssetId) return null;
    const set = { table: 0n, chain: 0n };
    outputs.forEach((output, index) => {
      if (output.walletId !== position.walletId) return;
      set.table += output.amount;
      set.chain += held[index] ?? 0n;
    });
    return set;
  });
  return { chainAmounts: utxoSets.map((set) => set?.chain ?? 0n), utxoSets, differing };
}
