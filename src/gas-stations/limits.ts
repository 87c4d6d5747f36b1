import { assetById, findChain, type ChainId } from '../catalogue/service';
import type { Config } from '../config';
import { toBaseUnits } from '../shared/money';
import type { GasStation } from './entities';

/**
 * What a gas station may spend on sponsorship: its own max_gas_price and daily budget, or, where it
 * set none (a new station that named none, a station made before the defaults existed), the
 * deployment's defaults for its chain as configured now (GAS_STATION_DEFAULT_*). There is no
 * unlimited station: a caller wanting more sets a bigger number.
 */
export interface StationLimits {
  /** In the chain's fee unit (gwei per gas, sat/vB, the whole fee in sun or lamports), a decimal. */
  maxGasPrice: string;
  /** Native base units per UTC day. */
  dailyBudget: bigint;
}

type LimitDefaults = Pick<Config, `GAS_STATION_DEFAULT_${'DAILY_BUDGET' | 'MAX_GAS_PRICE'}_${Uppercase<ChainId>}`>;

const defaultsOf = (config: LimitDefaults, chain: ChainId): { dailyBudget: string; maxGasPrice: string } =>
  ({
    bitcoin: { dailyBudget: config.GAS_STATION_DEFAULT_DAILY_BUDGET_BITCOIN, maxGasPrice: config.GAS_STATION_DEFAULT_MAX_GAS_PRICE_BITCOIN },
    ethereum: { dailyBudget: config.GAS_STATION_DEFAULT_DAILY_BUDGET_ETHEREUM, maxGasPrice: config.GAS_STATION_DEFAULT_MAX_GAS_PRICE_ETHEREUM },
    tron: { dailyBudget: config.GAS_STATION_DEFAULT_DAILY_BUDGET_TRON, maxGasPrice: config.GAS_STATION_DEFAULT_MAX_GAS_PRICE_TRON },
    solana: { dailyBudget: config.GAS_STATION_DEFAULT_DAILY_BUDGET_SOLANA, maxGasPrice: config.GAS_STATION_DEFAULT_MAX_GAS_PRICE_SOLANA },
  })[chain];

export function stationLimits(config: LimitDefaults, station: Pick<GasStation, 'chain' | 'maxGasPrice' | 'dailySponsorshipBudget'>): StationLimits {
  const defaults = defaultsOf(config, station.chain);
  const native = assetById(findChain(station.chain).nativeAssetId);
  return {
    maxGasPrice: station.maxGasPrice ?? defaults.maxGasPrice,
    dailyBudget: station.dailySponsorshipBudget != null ? BigInt(station.dailySponsorshipBudget) : toBaseUnits(defaults.dailyBudget, native.decimals),
  };
}
