import { ASSETS, type AssetInfo, type ChainId } from '../catalogue/service';
import { errors } from '../shared/errors';
import { AmountError, Money, toBaseUnits } from '../shared/money';
import type { PaymentMethod } from './entities';

/** A payout currency: ISO 4217 code and its minor units (the ISO 4217 exponent). */
export interface PayoutCurrency {
  code: string;
  minorUnits: number;
}

/** What a method pays in a country: limits in the currency's minor units, and the mobile networks it reaches. */
export interface MethodTerms {
  minRaw: bigint;
  maxRaw: bigint;
  /** Mobile money only: the operators the rail pays (upper case). */
  networks?: readonly string[];
}

/** A country the desk pays out in, in one currency, by bank and/or mobile money. */
export interface Corridor {
  /** ISO 3166-1 alpha-2. */
  country: string;
  currency: PayoutCurrency;
  methods: Partial<Record<PaymentMethod, MethodTerms>>;
}

const units = (amount: number, minorUnits: number) => BigInt(amount) * 10n ** BigInt(minorUnits);
const NGN = { code: 'NGN', minorUnits: 2 };
const KES = { code: 'KES', minorUnits: 2 };
const GHS = { code: 'GHS', minorUnits: 2 };
const UGX = { code: 'UGX', minorUnits: 0 };
const TZS = { code: 'TZS', minorUnits: 2 };
const ZAR = { code: 'ZAR', minorUnits: 2 };
const XOF = { code: 'XOF', minorUnits: 0 };

/**
 * The corridors (docs/payouts.md). Limits are per payout, in the destination currency: about
 * USD 1 to USD 50,000 by bank and USD 1 to USD 1,000 by mobile money, as the operators' own
 * per-transaction ceilings go.
 */
export const CORRIDORS: readonly Corridor[] = [
  { country: 'NG', currency: NGN, methods: { bank: { minRaw: units(1_000, 2), maxRaw: units(75_000_000, 2) } } },
  {
    country: 'KE',
    currency: KES,
    methods: { bank: { minRaw: units(100, 2), maxRaw: units(6_000_000, 2) }, mobile_money: { minRaw: units(10, 2), maxRaw: units(150_000, 2), networks: ['MPESA', 'AIRTEL'] } },
  },
  {
    country: 'GH',
    currency: GHS,
    methods: { bank: { minRaw: units(15, 2), maxRaw: units(750_000, 2) }, mobile_money: { minRaw: units(1, 2), maxRaw: units(15_000, 2), networks: ['MTN', 'TELECEL', 'AIRTELTIGO'] } },
  },
  {
    country: 'UG',
    currency: UGX,
    methods: { bank: { minRaw: units(5_000, 0), maxRaw: units(185_000_000, 0) }, mobile_money: { minRaw: units(1_000, 0), maxRaw: units(5_000_000, 0), networks: ['MTN', 'AIRTEL'] } },
  },
  {
    country: 'TZ',
    currency: TZS,
    methods: { bank: { minRaw: units(2_500, 2), maxRaw: units(130_000_000, 2) }, mobile_money: { minRaw: units(1_000, 2), maxRaw: units(5_000_000, 2), networks: ['MPESA', 'AIRTEL', 'TIGO'] } },
  },
  { country: 'ZA', currency: ZAR, methods: { bank: { minRaw: units(20, 2), maxRaw: units(900_000, 2) } } },
  { country: 'SN', currency: XOF, methods: { mobile_money: { minRaw: units(500, 0), maxRaw: units(600_000, 0), networks: ['ORANGE', 'WAVE', 'FREE'] } } },
];

/** The assets a payout is funded with, and the desk's fixed cost of moving each deposit on (base units). */
export const SOURCE_ASSETS: Readonly<Record<string, { networkFee: bigint }>> = {
  BTC: { networkFee: 2_000n },
  USDT_ETH: { networkFee: 1_500_000n },
  USDC_ETH: { networkFee: 1_500_000n },
  USDT_TRX: { networkFee: 1_000_000n },
  USDC_SOL: { networkFee: 50_000n },
};

/** The payout asset named by symbol on a chain (`USDT` on `tron`), or 400 unsupported_asset. */
export function sourceAsset(symbol: string, chain: ChainId): AssetInfo {
  const asset = ASSETS.find((candidate) => candidate.chain === chain && candidate.symbol === symbol.toUpperCase() && candidate.id in SOURCE_ASSETS);
  if (!asset) {
    const offered = ASSETS.filter((candidate) => candidate.id in SOURCE_ASSETS).map((candidate) => `${candidate.symbol} on ${candidate.chain}`);
    throw errors.invalid('unsupported_asset', `Payouts are funded with ${offered.join(', ')}; not ${symbol} on ${chain}.`, { param: 'fromAsset', details: { supported: offered } });
  }
  return asset;
}

/**
 * The corridor and method terms for a payout, or 400 unsupported_corridor naming what is not
 * offered: the country, the currency in that country, or the method there.
 */
export function findCorridor(country: string, currency: string, method: PaymentMethod): { corridor: Corridor; terms: MethodTerms } {
  const corridor = CORRIDORS.find((candidate) => candidate.country === country);
  const unsupported = (param: string, message: string) => errors.invalid('unsupported_corridor', message, { param, details: { country, currency, payment_method: method } });
  if (!corridor) throw unsupported('country', `No payouts to ${country}. Countries: ${CORRIDORS.map((candidate) => candidate.country).join(', ')}.`);
  if (corridor.currency.code !== currency) throw unsupported('toCurrency', `Payouts to ${country} are paid in ${corridor.currency.code}, not ${currency}.`);
  const terms = corridor.methods[method];
  if (!terms) throw unsupported('paymentMethod', `Payouts to ${country} go by ${Object.keys(corridor.methods).join(' or ')}, not ${method}.`);
  return { corridor, terms };
}

const currencyOf = (code: string): PayoutCurrency => {
  const currency = CORRIDORS.find((candidate) => candidate.currency.code === code)?.currency;
  if (!currency) throw new Error(`${code} is not a payout currency`);
  return currency;
};

/** Minor units as a decimal with exactly the currency's minor digits: ('15500000', 'NGN') -> '155000.00'; UGX has none. */
export function toFiatDisplay(raw: bigint | string, code: string): string {
  return new Money(raw.toString()).dividedBy(new Money(10).pow(currencyOf(code).minorUnits)).toFixed(currencyOf(code).minorUnits);
}

/** A decimal amount of the currency to minor units; more decimals than its minor units is null (never rounded). */
export function parseFiat(display: string, code: string): bigint | null {
  try {
    return toBaseUnits(display, currencyOf(code).minorUnits);
  } catch (error) {
    if (error instanceof AmountError) return null;
    throw error;
  }
}
