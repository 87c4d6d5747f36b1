/**
 * The devnet ledger's reads, as the provider and the RPC fronts answer them: the tip, balances,
 * nonces, the transfers a transaction makes and the fee market its mempool and tip make. They take
 * no lock, except devnetTip (and so Ethereum's fee market) before genesis, to make the genesis block.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ChainId } from '../../catalogue/service';
import type { FeeMarket } from '../provider';
import { DevnetBalance, DevnetBlock, DevnetNonce, DevnetOutput, DevnetTransaction } from './entities';
import { levelsForQueue, nextBaseFee, type QueuedBid } from './fee-market';
import { underChainLock, type AcceptedTransaction } from './ledger';
import { DEVNET_PARAMS, ETHEREUM_INITIAL_BASE_FEE } from './params';

/** The newest block, or null before genesis. */
export function tipBlock(em: EntityManager, chain: ChainId): Promise<DevnetBlock | null> {
  return em.findOne(DevnetBlock, { chain }, { orderBy: { height: 'desc' } });
}

/**
 * The newest block, creating the genesis block on first use: committed on its own, or inside the caller's
 * transaction when there is one (a savepoint on its connection, not a second connection while it holds the
 * first, issue 53; should that transaction roll back, the next use makes the genesis again).
 */
export async function devnetTip(em: EntityManager, chain: ChainId): Promise<DevnetBlock> {
  const tip = await tipBlock(em, chain);
  if (tip) return tip;
  await underChainLock(em.getTransactionContext() ? em : em.fork(), chain, async () => undefined);
  return (await tipBlock(em, chain))!;
}

/** Read afresh: balances move by SQL (moveBalance), which an entity loaded earlier in the same EntityManager would not show. */
export async function devnetBalance(em: EntityManager, chain: ChainId, address: string, assetId: string): Promise<bigint> {
  const row = await em.findOne(DevnetBalance, { chain, address, assetId }, { refresh: true });
  return row ? BigInt(row.amount) : 0n;
}

/** How many of the account's transactions are mined: its next nonce at the tip. */
export async function minedNonce(em: EntityManager, chain: ChainId, address: string): Promise<bigint> {
  const row = await em.findOne(DevnetNonce, { chain, address });
  return row ? BigInt(row.nonce) : 0n;
}

/** The next nonce counting the account's mempool transactions (`pending`). */
export async function pendingNonce(em: EntityManager, chain: ChainId, address: string): Promise<bigint> {
  return (await minedNonce(em, chain, address)) + BigInt(await em.count(DevnetTransaction, { chain, sender: address, status: 'mempool' }));
}

/** The transfers of mined or pending transactions, by txid: Bitcoin outputs as `out:<vout>`, account chains as stored. */
export async function transfersOf(em: EntityManager, chain: ChainId, entries: DevnetTransaction[]): Promise<Map<string, AcceptedTransaction['transfers']>> {
  const result = new Map<string, AcceptedTransaction['transfers']>();
  const utxo = entries.filter((entry) => entry.vsize !== null);
  if (utxo.length) {
    const outputs = await em.find(DevnetOutput, { chain, txid: { $in: utxo.map((entry) => entry.txid) } }, { orderBy: { vout: 'asc' } });
    for (const entry of utxo) {
      result.set(entry.txid, utxoTransfers(outputs.filter((output) => output.txid === entry.txid).map((output) => ({ ...output, amount: BigInt(output.amount) }))));
    }
  }
  for (const entry of entries.filter((candidate) => candidate.vsize === null)) {
    result.set(entry.txid, entry.transfers.map((transfer) => ({ ...transfer, amount: BigInt(transfer.amount) })));
  }
  return result;
}

export const utxoTransfers = (outputs: { vout: number; address: string | null; amount: bigint }[]) =>
  outputs.filter((output) => output.address !== null).map((output) => ({ position: `out:${output.vout}`, to: output.address!, assetId: 'BTC', amount: output.amount }));

/**
 * The fee market as the mempool and the tip make it: Ethereum's next base fee from the tip's
 * fullness (EIP-1559) and tips by mempool depth; Bitcoin's sat/vB and Tron's and Solana's flat
 * fee by mempool depth against block capacity.
 */
export async function devnetFeeMarket(em: EntityManager, chain: ChainId): Promise<FeeMarket> {
  const params = DEVNET_PARAMS[chain];
  const mempool = await em.find(DevnetTransaction, { chain, status: 'mempool' });
  if (chain === 'ethereum') {
    const tip = await devnetTip(em, chain);
    const queue: QueuedBid[] = mempool.map((entry) => ({ bid: BigInt(entry.gas!.maxPriorityFeePerGas), weight: BigInt(entry.gas!.used) }));
    return {
      model: 'eip1559',
      baseFeePerGas: nextBaseFee(BigInt(tip.baseFeePerGas ?? ETHEREUM_INITIAL_BASE_FEE), BigInt(tip.gasUsed ?? 0), params.blockCapacity),
      priorityFeePerGas: levelsForQueue(queue, params.blockCapacity, params.feeFloors),
    };
  }
  if (chain === 'bitcoin') {
    const queue = mempool.map((entry) => ({ bid: BigInt(entry.feeBid), weight: BigInt(entry.vsize!) }));
    return { model: 'per_byte', satPerVbyte: levelsForQueue(queue, params.blockCapacity, params.feeFloors) };
  }
  if (!params.feeMovesWithLoad) return { model: 'flat', transferFee: { ...params.feeFloors } };
  const queue = mempool.map((entry) => ({ bid: BigInt(entry.feeBid), weight: 1n }));
  return { model: 'flat', transferFee: levelsForQueue(queue, params.blockCapacity, params.feeFloors) };
}
