import { ASSETS, findChain, type ChainId } from '../catalogue/service';
import { toDisplay } from '../shared/money';
import { FEE_LEVELS, type FeeLevel, type FeeMarket } from './provider';

/** Gas of a plain ether transfer: what `network_fee` prices. */
const NATIVE_TRANSFER_GAS = 21_000n;
const GWEI_DECIMALS = 9;
/** Indicative inclusion time per level on Ethereum (12 s slots): next block, within three, within five. */
const ETHEREUM_CONFIRMATION_SECS: Record<FeeLevel, number> = { low: 60, medium: 36, high: 12 };

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
export function presentNetworkFee(chainId: ChainId, market: FeeMarket) {
  const chain = findChain(chainId);
  const asset = ASSETS.find((candidate) => candidate.id === chain.nativeAssetId)!;
  const tier = (level: FeeLevel): FeeTier => {
    const priority = market.priorityFeePerGas[level];
    const gasPrice = market.baseFeePerGas + priority;
    return {
      base_fee: toDisplay(market.baseFeePerGas, GWEI_DECIMALS),
      priority_fee: toDisplay(priority, GWEI_DECIMALS),
      gas_price: toDisplay(gasPrice, GWEI_DECIMALS),
      fee_per_byte: null,
      network_fee: toDisplay(gasPrice * NATIVE_TRANSFER_GAS, asset.decimals),
      // No price source yet: a USD figure would be invented.
      fee_usd: null,
      confirmation_time_secs: ETHEREUM_CONFIRMATION_SECS[level],
    };
  };
  return {
    object: 'network_fee' as const,
    asset_id: asset.id,
    chain: chain.id,
    symbol: asset.symbol,
    fee_unit: 'gwei',
    fees: Object.fromEntries(FEE_LEVELS.map((level) => [level, tier(level)])) as Record<FeeLevel, FeeTier>,
  };
}
