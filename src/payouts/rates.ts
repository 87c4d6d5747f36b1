import type { Environment } from '../api-keys/entities';
import type { Config } from '../config';
import { Money } from '../shared/money';

/**
 * Where exchange rates come from. A live provider (an exchange's or a liquidity partner's feed)
 * is one new file behind this interface, chosen in `rateProviderFor`.
 */
export interface RateProvider {
  /** Units of `currency` per one unit of the asset, the mid rate, as an exact decimal string; null when it quotes none. */
  midRate(assetId: string, currency: string): Promise<string | null>;
}

/** The sandbox's rates: the asset's USD price (PRICE_TABLE_SANDBOX) times the currency per USD (PAYOUT_RATE_TABLE_SANDBOX). */
export class SandboxRateTable implements RateProvider {
  constructor(
    private readonly usdPrices: Record<string, string>,
    private readonly perUsd: Record<string, string>,
  ) {}

  async midRate(assetId: string, currency: string): Promise<string | null> {
    const usd = this.usdPrices[assetId];
    const rate = this.perUsd[currency];
    return usd === undefined || rate === undefined ? null : new Money(usd).times(rate).toFixed();
  }
}

/** The environment's rate provider; live has none in this build, so live quotes are refused (docs/payouts.md). */
export function rateProviderFor(config: Pick<Config, 'PRICE_TABLE_SANDBOX' | 'PAYOUT_RATE_TABLE_SANDBOX'>, environment: Environment): RateProvider | null {
  return environment === 'sandbox' ? new SandboxRateTable(config.PRICE_TABLE_SANDBOX, config.PAYOUT_RATE_TABLE_SANDBOX) : null;
}
