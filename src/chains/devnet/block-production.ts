/**
 * The devnet's block production: a block takes mempool transactions by fee bid up to its capacity
 * (Bitcoin: parents before children; Ethereum: each sender in nonce order at the EIP-1559 base fee),
 * then moves their balances, charges their fees and chains itself to its parent by hash.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha256';
import type { ChainId } from '../../catalogue/service';
import { canonicalJson } from '../../shared/canonical-json';
import type { ChainTip } from '../provider';
import { DevnetBlock, DevnetOutput, DevnetTransaction } from './entities';
import { nextBaseFee } from './fee-market';
import { faucetAddress, moveBalance, rulesFor, storeUtxo, underChainLock } from './ledger';
import { tipBlock } from './ledger-reads';
import { BITCOIN_BLOCK_SUBSIDY, DEVNET_PARAMS, ETHEREUM_INITIAL_BASE_FEE } from './params';

/**
 * Mines `count` blocks at once under the chain's lock. With `producedBy` (a workflow step's id), a
 * request already carried out mines nothing more and answers the tip it produced: a retried activity
 * never mines twice.
 */
export function mineDevnetBlocks(em: EntityManager, chain: ChainId, count: number, producedBy?: string): Promise<ChainTip> {
  return underChainLock(em, chain, async (tx) => {
    if (producedBy) {
      const done = await tx.findOne(DevnetBlock, { chain, producedBy }, { orderBy: { height: 'desc' } });
      if (done) return { height: done.height, hash: done.hash };
    }
    let tip = (await tipBlock(tx, chain))!;
    for (let mined = 0; mined < count; mined++) tip = await mineBlock(tx, chain, tip, producedBy ?? null);
    return { height: tip.height, hash: tip.hash };
  });
}

/** `faucetTopUp`: Bitcoin, what the coinbase pays the faucet besides the subsidy and the fees (replenishFaucet). */
export async function mineBlock(tx: EntityManager, chain: ChainId, parent: DevnetBlock, producedBy: string | null, faucetTopUp = 0n): Promise<DevnetBlock> {
  const params = DEVNET_PARAMS[chain];
  const rules = rulesFor(chain);
  const height = parent.height + 1;
  const mempool = await tx.find(DevnetTransaction, { chain, status: 'mempool' }, { orderBy: { acceptedAt: 'asc', txid: 'asc' } });
  let included: DevnetTransaction[];
  let baseFeePerGas: string | null = null;
  let gasUsed: string | null = null;
  if (rules.buildCoinbase) {
    const chosen = await selectUtxo(tx, chain, mempool, params.blockCapacity);
    const fees = chosen.reduce((sum, entry) => sum + BigInt(entry.maxFee), 0n);
    const coinbase = storeUtxo(tx, chain, rules.buildCoinbase({ height, address: faucetAddress(chain), amount: BITCOIN_BLOCK_SUBSIDY + fees + faucetTopUp }), true);
    included = [coinbase, ...chosen];
    await tx.flush();
    await applyUtxo(tx, chain, included);
  } else if (chain === 'ethereum') {
    const baseFee = nextBaseFee(BigInt(parent.baseFeePerGas ?? ETHEREUM_INITIAL_BASE_FEE), BigInt(parent.gasUsed ?? 0), params.blockCapacity);
    included = selectByNonce(mempool, baseFee, params.blockCapacity);
    baseFeePerGas = baseFee.toString();
    gasUsed = (await applyAccount(tx, chain, included, baseFee)).toString();
  } else {
    included = [...mempool].sort((a, b) => compareDesc(BigInt(a.feeBid), BigInt(b.feeBid))).slice(0, Number(params.blockCapacity));
    await applyAccount(tx, chain, included, null);
  }
  included.forEach((entry, index) => Object.assign(entry, { status: 'mined', blockHeight: height, blockIndex: index }));
  const time = blockTime(parent);
  const contents = { chain, height, parentHash: parent.hash, time: time.toISOString(), baseFeePerGas, txids: included.map((entry) => entry.txid) };
  const block = tx.create(DevnetBlock, { chain, height, hash: params.formatHash(sha256(canonicalJson(contents))), parentHash: parent.hash, time, baseFeePerGas, gasUsed, producedBy });
  await tx.flush();
  return block;
}

/** Highest fee rate first; a child only after the parents it spends are mined or in this block. */
async function selectUtxo(tx: EntityManager, chain: ChainId, mempool: DevnetTransaction[], capacity: bigint): Promise<DevnetTransaction[]> {
  const inMempool = new Set(mempool.map((entry) => entry.txid));
  const spent = mempool.length ? await tx.find(DevnetOutput, { chain, spentBy: { $in: [...inMempool] } }) : [];
  const parents = new Map<string, string[]>();
  for (const output of spent) parents.set(output.spentBy!, [...(parents.get(output.spentBy!) ?? []), output.txid]);
  const candidates = [...mempool].sort((a, b) => compareDesc(BigInt(a.feeBid), BigInt(b.feeBid)));
  const chosen: DevnetTransaction[] = [];
  const taken = new Set<string>();
  let room = capacity;
  for (let added = true; added; ) {
    added = false;
    for (const candidate of candidates) {
      if (taken.has(candidate.txid) || BigInt(candidate.vsize!) > room) continue;
      if (!(parents.get(candidate.txid) ?? []).every((parent) => !inMempool.has(parent) || taken.has(parent))) continue;
      chosen.push(candidate);
      taken.add(candidate.txid);
      room -= BigInt(candidate.vsize!);
      added = true;
    }
  }
  return chosen;
}

/**
 * Moves each mined output's value: the spent ones leave their address, the new ones reach theirs. Netted
 * per address first: an output made and spent in the same block (a chain of unconfirmed spends) would
 * otherwise be debited before it is credited.
 */
async function applyUtxo(tx: EntityManager, chain: ChainId, included: DevnetTransaction[]): Promise<void> {
  const txids = included.map((entry) => entry.txid);
  const outputs = await tx.find(DevnetOutput, { chain, $or: [{ txid: { $in: txids } }, { spentBy: { $in: txids } }] });
  const net = new Map<string, bigint>();
  const move = (address: string, delta: bigint) => net.set(address, (net.get(address) ?? 0n) + delta);
  for (const output of outputs) {
    if (!output.address) continue;
    if (output.spentBy && txids.includes(output.spentBy)) move(output.address, -BigInt(output.amount));
    if (txids.includes(output.txid)) move(output.address, BigInt(output.amount));
  }
  for (const [address, delta] of net) await moveBalance(tx, chain, address, 'BTC', delta);
  for (const entry of included) entry.feePaid = entry.maxFee;
}

/**
 * Ethereum: each sender's transactions in nonce order, the best-paying head first (its tip at this
 * base fee), those that cannot pay the base fee left for a later block, until the gas limit.
 */
function selectByNonce(mempool: DevnetTransaction[], baseFee: bigint, gasLimit: bigint): DevnetTransaction[] {
  const queues = new Map<string, DevnetTransaction[]>();
  for (const entry of mempool) queues.set(entry.sender!, [...(queues.get(entry.sender!) ?? []), entry]);
  for (const queue of queues.values()) queue.sort((a, b) => compareDesc(BigInt(b.nonce!), BigInt(a.nonce!)));
  const tip = (entry: DevnetTransaction) => min(BigInt(entry.gas!.maxPriorityFeePerGas), BigInt(entry.gas!.maxFeePerGas) - baseFee);
  const chosen: DevnetTransaction[] = [];
  let room = gasLimit;
  for (;;) {
    const heads = [...queues.values()]
      .map((queue) => queue[0])
      .filter((entry): entry is DevnetTransaction => entry !== undefined && BigInt(entry.gas!.maxFeePerGas) >= baseFee && BigInt(entry.gas!.used) <= room);
    if (!heads.length) return chosen;
    const best = heads.reduce((a, b) => (tip(b) > tip(a) ? b : a));
    chosen.push(best);
    room -= BigInt(best.gas!.used);
    queues.get(best.sender!)!.shift();
  }
}

/** Moves every transfer and charges the fee: gas used x the effective price (Ethereum), or the flat fee bid. Returns the gas used. */
async function applyAccount(tx: EntityManager, chain: ChainId, included: DevnetTransaction[], baseFee: bigint | null): Promise<bigint> {
  const native = DEVNET_PARAMS[chain].nativeAssetId;
  let gasUsed = 0n;
  for (const entry of included) {
    let fee = BigInt(entry.feeBid);
    if (baseFee !== null && entry.gas) {
      const price = min(BigInt(entry.gas.maxFeePerGas), baseFee + BigInt(entry.gas.maxPriorityFeePerGas));
      fee = BigInt(entry.gas.used) * price;
      gasUsed += BigInt(entry.gas.used);
      entry.gas = { ...entry.gas, effectiveGasPrice: price.toString() };
    }
    entry.feePaid = fee.toString();
    await moveBalance(tx, chain, entry.sender!, native, -fee);
    for (const transfer of entry.transfers) {
      await moveBalance(tx, chain, entry.sender!, transfer.assetId, -BigInt(transfer.amount));
      await moveBalance(tx, chain, transfer.to, transfer.assetId, BigInt(transfer.amount));
    }
    if (entry.nonce !== null) {
      await tx.execute(
        `insert into devnet_nonces (chain, address, nonce) values (?, ?, 1)
         on conflict (chain, address) do update set nonce = devnet_nonces.nonce + 1`,
        [chain, entry.sender],
      );
    }
  }
  return gasUsed;
}

/** One second after the parent at least: block times strictly increase, even for blocks mined at once. */
const blockTime = (parent: DevnetBlock) => new Date(Math.max(Date.now(), parent.time.getTime() + 1000));
const compareDesc = (a: bigint, b: bigint) => (a > b ? -1 : a < b ? 1 : 0);
const min = (a: bigint, b: bigint) => (a < b ? a : b);
