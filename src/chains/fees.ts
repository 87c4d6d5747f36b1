import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { usdValue, type PriceSource } from '../catalogue/prices';
import { ASSETS, findChain, type ChainId } from '../catalogue/service';
import { DomainError, errors } from '../shared/errors';
import { toDisplay } from '../shared/money';
import { ChainUnavailableError, type ChainNodes } from './nodes';
import { FEE_LEVELS, NodeUnavailableError, type FeeLevel, type FeeMarket } from './provider';

/** Gas of a plain ether transfer: what `network_fee` prices on Ethereum. */
export const NATIVE_TRANSFER_GAS = 21_000n;
/** Virtual size of a one-input, two-output p2wpkh payment: what `network_fee` prices on Bitcoin. */
export const P2WPKH_PAYMENT_VBYTES = 141n;
export const GWEI_DECIMALS = 9;

/**
 * Indicative time to the chain's confirmation count per level: Ethereum's 12 s slots (next block,
 * within three, within five), Bitcoin's 10 min blocks, Tron's 3 s blocks, Solana's 400 ms slots.
 */
export const CONFIRMATION_SECS: Record<ChainId, Record<FeeLevel, number>> = {
  ethereum: { low: 60, medium: 36, high: 12 },
  bitcoin: { low: 3600, medium: 1800, high: 600 },
  tron: { low: 9, medium: 6, high: 3 },
  solana: { low: 13, medium: 13, high: 13 },
};
/** The unit `base_fee`, `priority_fee`, `gas_price` or `fee_per_byte` are given in. */
const FEE_UNIT: Record<ChainId, string> = { ethereum: 'gwei', bitcoin: 'sat/vB', tron: 'sun', solana: 'lamports' };

export interface FeeTier {
  base_fee: string | null;
  priority_fee: string | null;
  gas_price: string | null;
  fee_per_byte: string | null;
  network_fee: string;
  fee_usd: string | null;
  confirmation_time_secs: number;
}

/** The specification's Network fee response, from the provider's fee market; every amount an exact decimal string. */
export function presentNetworkFee(chainId: ChainId, market: FeeMarket, prices: PriceSource) {
  const chain = findChain(chainId);
  const asset = ASSETS.find((candidate) => candidate.id === chain.nativeAssetId)!;
  const tier = (level: FeeLevel): FeeTier => {
    const common = { fee_usd: usdValue(prices, asset, networkFeeOf(market, level)), confirmation_time_secs: CONFIRMATION_SECS[chain.id][level] };
    switch (market.model) {
      case 'eip1559': {
        const priority = market.priorityFeePerGas[level];
        const gasPrice = market.baseFeePerGas + priority;
        return {
          base_fee: toDisplay(market.baseFeePerGas, GWEI_DECIMALS),
          priority_fee: toDisplay(priority, GWEI_DECIMALS),
          gas_price: toDisplay(gasPrice, GWEI_DECIMALS),
          fee_per_byte: null,
          network_fee: toDisplay(networkFeeOf(market, level), asset.decimals),
          ...common,
        };
      }
      case 'per_byte':
        return {
          base_fee: null,
          priority_fee: null,
          gas_price: null,
          fee_per_byte: market.satPerVbyte[level].toString(),
          network_fee: toDisplay(networkFeeOf(market, level), asset.decimals),
          ...common,
        };
      case 'flat':
        return {
          base_fee: null,
          priority_fee: null,
          gas_price: null,
          fee_per_byte: null,
          network_fee: toDisplay(networkFeeOf(market, level), asset.decimals),
          ...common,
        };
    }
  };
  return {
    object: 'network_fee' as const,
    asset_id: asset.id,
    chain: chain.id,
    symbol: asset.symbol,
    fee_unit: FEE_UNIT[chain.id],
    fees: Object.fromEntries(FEE_LEVELS.map((level) => [level, tier(level)])) as Record<FeeLevel, FeeTier>,
  };
}

/** The fee of a plain native transfer at `level`, in the native asset's base units: what `network_fee` prices. */
function networkFeeOf(market: FeeMarket, level: FeeLevel): bigint {
  switch (market.model) {
    case 'eip1559':
      return (market.baseFeePerGas + market.priorityFeePerGas[level]) * NATIVE_TRANSFER_GAS;
    case 'per_byte':
      return market.satPerVbyte[level] * P2WPKH_PAYMENT_VBYTES;
    case 'flat':
      return market.transferFee[level];
  }
}

/**
 * The highest Bitcoin fee rate any request may name, fee_rate or max_fee_rate, in sat/vB: Bitcoin Core's
 * default -maxfeerate (0.10 BTC/kvB), above which its sendrawtransaction refuses a transaction as an
 * absurd fee. About five times the highest rates paid in the fee spikes of 2023-2024.
 */
export const BITCOIN_FEE_RATE_CEILING = 10_000n;

/** A fee the caller named, and the market it is judged against (all in one unit: sat/vB, wei per gas...). */
export interface CallerFee {
  /** The request's field. */
  param: string;
  given: bigint;
  marketHigh: bigint;
  /** FEE_MARKET_MAX_MULTIPLE. */
  multiple: number;
  unit: string;
}

/**
 * Refuses a caller's fee above `multiple` x the market's high level: 400 `fee_above_market` naming the
 * field, details market_high, allowed_max, given. A fee that high is a slip (a unit or a digit) far more
 * often than an intent; a caller who means it states its own ceiling, and is then not judged here.
 */
export function requireFeeNearMarket({ param, given, marketHigh, multiple, unit }: CallerFee): void {
  const allowedMax = marketHigh * BigInt(multiple);
  if (given <= allowedMax) return;
  throw errors.invalid('fee_above_market', `${param} ${given} ${unit} is more than ${multiple} times the market's high level (${marketHigh} ${unit}): at most ${allowedMax} ${unit}, or state your own ceiling.`, {
    param,
    details: { market_high: marketHigh.toString(), allowed_max: allowedMax.toString(), given: given.toString(), unit },
  });
}

/**
 * The chain's fee market for the environment, read from its node; no usable node answers 503
 * `chain_node_unavailable` (details.reason: not_configured, network_mismatch, token_mismatch, unreachable, or checking: a node not yet checked, try again shortly).
 */
export async function readFeeMarket(chains: ChainNodes, chain: ChainId, environment: Environment, em?: EntityManager): Promise<FeeMarket> {
  try {
    const provider = await chains.provider(chain, environment, em);
    return await provider.feeMarket();
  } catch (error) {
    if (error instanceof ChainUnavailableError) throw chainNodeUnavailable(error.reason, error.message);
    if (error instanceof NodeUnavailableError) throw chainNodeUnavailable('unreachable', `the ${chain} node did not answer`);
    throw error;
  }
}

/** 503 chain_node_unavailable: no usable node serves the chain (details.reason says why). */
export const chainNodeUnavailable = (reason: string, message: string) =>
  new DomainError({ kind: 'unavailable', code: 'chain_node_unavailable', message, details: { reason } });
