import { FEE_LEVELS, type FeeLevel } from '../provider';
import { ETHEREUM_BASE_FEE_CHANGE_DENOMINATOR, ETHEREUM_ELASTICITY_MULTIPLIER } from './params';

/**
 * The devnet's fee market, pure: what each level must offer given the mempool, and Ethereum's
 * base fee from the parent block's fullness.
 */

/** Blocks within which each level expects to be mined. */
const TARGET_BLOCKS: Record<FeeLevel, bigint> = { high: 1n, medium: 3n, low: 6n };

/** A mempool transaction as the market sees it: its bid per unit and the room it takes in a block. */
export interface QueuedBid {
  bid: bigint;
  weight: bigint;
}

/**
 * Each level's bid: its floor while the mempool fits in the level's target blocks, otherwise one
 * more than the bid of the transaction that would be the last to fit (what a bitcoind or geth
 * estimator reads from a deep mempool). Levels never cross: high ≥ medium ≥ low.
 */
export function levelsForQueue(queue: QueuedBid[], blockCapacity: bigint, floors: Record<FeeLevel, bigint>): Record<FeeLevel, bigint> {
  const byBid = [...queue].sort((a, b) => (a.bid > b.bid ? -1 : a.bid < b.bid ? 1 : 0));
  const clearing = (room: bigint): bigint => {
    let used = 0n;
    for (const entry of byBid) {
      used += entry.weight;
      if (used > room) return entry.bid + 1n;
    }
    return 0n;
  };
  const levels = Object.fromEntries(FEE_LEVELS.map((level) => [level, max(floors[level], clearing(blockCapacity * TARGET_BLOCKS[level]))])) as Record<FeeLevel, bigint>;
  levels.medium = max(levels.medium, levels.low);
  levels.high = max(levels.high, levels.medium);
  return levels;
}

/** EIP-1559: the base fee of the block after one that charged `baseFee` and used `gasUsed` of `gasLimit`. */
export function nextBaseFee(baseFee: bigint, gasUsed: bigint, gasLimit: bigint): bigint {
  const target = gasLimit / ETHEREUM_ELASTICITY_MULTIPLIER;
  if (gasUsed === target) return baseFee;
  if (gasUsed > target) return baseFee + max(1n, (baseFee * (gasUsed - target)) / target / ETHEREUM_BASE_FEE_CHANGE_DENOMINATOR);
  return baseFee - (baseFee * (target - gasUsed)) / target / ETHEREUM_BASE_FEE_CHANGE_DENOMINATOR;
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);
