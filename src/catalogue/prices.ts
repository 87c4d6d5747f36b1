import type { Environment } from '../api-keys/entities';
import type { Config } from '../config';
import type { AssetInfo } from './service';
import { Money, toDisplay, type MoneyValue } from '../shared/money';

/** Where USD prices come from: an exact decimal price of one unit of an asset, or null when unknown. */
export interface PriceSource {
  usdPrice(assetId: string): MoneyValue | null;
}

/** A fixed table of prices (the sandbox's PRICE_TABLE_SANDBOX). */
export class TablePriceSource implements PriceSource {
  constructor(private readonly prices: Record<string, string>) {}

  usdPrice(assetId: string): MoneyValue | null {
    const price = this.prices[assetId];
    return price === undefined ? null : new Money(price);
  }
}

/** Live keys have no market feed yet: every USD figure is null rather than invented. */
const NO_PRICES: PriceSource = { usdPrice: () => null };

export const priceSourceFor = (config: Config, environment: Environment): PriceSource =>
  environment === 'sandbox' ? new TablePriceSource(config.PRICE_TABLE_SANDBOX) : NO_PRICES;

/** The USD value of `baseUnits` of `asset`, exact (not rounded), or null when the source has no price for it. */
export function usdValue(prices: PriceSource, asset: AssetInfo, baseUnits: bigint): string | null {
  const price = prices.usdPrice(asset.id);
  return price === null ? null : new Money(toDisplay(baseUnits, asset.decimals)).times(price).toFixed();
}
