import type { EntityManager } from '@mikro-orm/postgresql';
import { assetAmount, assetById } from '../catalogue/service';
import type { Config } from '../config';
import type { Tenant } from '../custody/service';
import { Organization } from '../organizations/entities';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { MAX_BASE_UNITS, Money, toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { findCorridor, parseFiat, sourceAsset, SOURCE_ASSETS, toFiatDisplay } from './corridors';
import { PayoutQuote, type PaymentMethod } from './entities';
import { hasPayoutRails, payoutRailUnavailable } from './rails';
import { rateProviderFor } from './rates';

/** Quoted rates carry this many decimal places, rounded down. */
export const RATE_DECIMALS = 6;
const RATE_SCALE = 10n ** BigInt(RATE_DECIMALS);

export interface PricingTerms {
  /** The provider's mid rate: units of the currency per one unit of the asset. */
  midRate: string;
  spreadBps: number;
  serviceFeeBps: number;
  /** The asset's fixed network fee, base units. */
  networkFee: bigint;
  assetDecimals: number;
  currencyMinorUnits: number;
}

export interface Pricing {
  /** The quoted rate, `RATE_DECIMALS` places. */
  rate: string;
  fromAmount: bigint;
  toAmount: bigint;
  fees: { type: 'service_fee' | 'network_fee'; amount: bigint }[];
}

/** What one side of the price is given as: an amount of the asset sent, or of the currency paid out. */
export type PricedAmount = { in: 'asset'; baseUnits: bigint } | { in: 'currency'; minorUnits: bigint };

/**
 * Prices a payout exactly, in integers (docs/payouts.md):
 * - rate = mid × (10,000 − spread bps) / 10,000, rounded down to 6 decimal places;
 * - service_fee = fromAmount × fee bps / 10,000, rounded up to a base unit; network_fee fixed per asset;
 * - toAmount = (fromAmount − fees) × rate, rounded down to the currency's minor unit;
 * - given toAmount instead, fromAmount is the smallest amount whose toAmount reaches it.
 * Returns null when the fees would take everything.
 */
export function price(amount: PricedAmount, terms: PricingTerms): Pricing | null {
  const rateUnits = BigInt(
    new Money(terms.midRate)
      .times(10_000 - terms.spreadBps)
      .dividedBy(10_000)
      .times(RATE_SCALE.toString())
      .toFixed(0, Money.ROUND_DOWN),
  );
  if (rateUnits <= 0n) return null;
  const serviceFee = (from: bigint) => (from * BigInt(terms.serviceFeeBps) + 9_999n) / 10_000n;
  const net = (from: bigint) => from - serviceFee(from) - terms.networkFee;
  // to = floor(net × rateUnits × 10^minor / (10^6 × 10^decimals)): one integer division, no rounding before it.
  const scale = RATE_SCALE * 10n ** BigInt(terms.assetDecimals);
  const minor = 10n ** BigInt(terms.currencyMinorUnits);
  const toAmountOf = (from: bigint) => {
    const left = net(from);
    return left <= 0n ? 0n : (left * rateUnits * minor) / scale;
  };
  let fromAmount: bigint;
  if (amount.in === 'asset') {
    fromAmount = amount.baseUnits;
  } else {
    const target = amount.minorUnits;
    if (target <= 0n) return null;
    // The smallest net reaching the target, then the smallest amount leaving that net after fees; then exact by stepping.
    const neededNet = (target * scale + rateUnits * minor - 1n) / (rateUnits * minor);
    fromAmount = ((neededNet + terms.networkFee) * 10_000n + BigInt(9_999 - terms.serviceFeeBps)) / BigInt(10_000 - terms.serviceFeeBps);
    while (toAmountOf(fromAmount) < target) fromAmount += 1n;
    while (fromAmount > 0n && toAmountOf(fromAmount - 1n) >= target) fromAmount -= 1n;
  }
  if (net(fromAmount) <= 0n) return null;
  const toAmount = toAmountOf(fromAmount);
  if (toAmount <= 0n) return null;
  return {
    rate: toDisplay(rateUnits, RATE_DECIMALS),
    fromAmount,
    toAmount: amount.in === 'currency' ? amount.minorUnits : toAmount,
    fees: [
      { type: 'service_fee', amount: serviceFee(fromAmount) },
      { type: 'network_fee', amount: terms.networkFee },
    ],
  };
}

export interface QuoteRequest {
  fromAsset: string;
  chain: PayoutQuote['chain'];
  amount: string;
  amountCurrency?: string;
  toCurrency: string;
  country: string;
  paymentMethod: PaymentMethod;
}

/**
 * Issues a quote: the corridor and the asset must be offered (400 unsupported_corridor /
 * unsupported_asset), the environment must have payout rails (live has none: 503
 * payout_rail_unavailable), the rate comes from the environment's rate provider, and the fiat amount must
 * lie within the corridor's limits (400 amount_below_minimum / amount_above_maximum). Holds for
 * PAYOUT_QUOTE_TTL_SECONDS.
 */
export async function createQuote(em: EntityManager, config: Config, tenant: Tenant, input: QuoteRequest): Promise<PayoutQuote> {
  const asset = sourceAsset(input.fromAsset, input.chain);
  const { corridor, terms } = findCorridor(input.country, input.toCurrency, input.paymentMethod);
  const amountCurrency = (input.amountCurrency ?? asset.symbol).toUpperCase();
  if (amountCurrency !== asset.symbol && amountCurrency !== corridor.currency.code) {
    throw errors.validation(`amountCurrency is the asset sent (${asset.symbol}) or the currency paid out (${corridor.currency.code}).`, 'amountCurrency');
  }
  let amount: PricedAmount;
  if (amountCurrency === asset.symbol) {
    amount = { in: 'asset', baseUnits: assetAmount(input.amount, asset, 'amount', false) };
  } else {
    const minorUnits = parseFiat(input.amount, corridor.currency.code);
    if (minorUnits === null) {
      throw errors.validation(`amount has at most ${corridor.currency.minorUnits} decimal places in ${corridor.currency.code}, and at most ${MAX_BASE_UNITS} minor units.`, 'amount');
    }
    amount = { in: 'currency', minorUnits };
  }

  // A payout needs both a rail to pay it and rates to price it: without either it is refused, never simulated.
  const rates = rateProviderFor(config, tenant.environment);
  if (!rates || !hasPayoutRails(tenant.environment)) throw payoutRailUnavailable(tenant.environment);
  const midRate = await rates.midRate(asset.id, corridor.currency.code);
  if (midRate === null) {
    throw errors.invalid('unsupported_corridor', `No ${asset.symbol}/${corridor.currency.code} rate is configured in this environment.`, {
      details: { reason: 'no_rate', country: input.country, currency: input.toCurrency, payment_method: input.paymentMethod },
    });
  }
  const priced = price(amount, {
    midRate,
    spreadBps: config.PAYOUT_SPREAD_BPS,
    serviceFeeBps: config.PAYOUT_SERVICE_FEE_BPS,
    networkFee: SOURCE_ASSETS[asset.id]!.networkFee,
    assetDecimals: asset.decimals,
    currencyMinorUnits: corridor.currency.minorUnits,
  });
  const limits = { currency: corridor.currency.code, min: toFiatDisplay(terms.minRaw, corridor.currency.code), max: toFiatDisplay(terms.maxRaw, corridor.currency.code) };
  if (!priced || priced.toAmount < terms.minRaw) {
    throw errors.invalid('amount_below_minimum', `A ${input.paymentMethod} payout to ${input.country} is at least ${limits.min} ${limits.currency} after fees.`, { param: 'amount', details: limits });
  }
  if (priced.toAmount > terms.maxRaw) {
    throw errors.invalid('amount_above_maximum', `A ${input.paymentMethod} payout to ${input.country} is at most ${limits.max} ${limits.currency}.`, { param: 'amount', details: limits });
  }
  const quote = em.create(PayoutQuote, {
    organization: em.getReference(Organization, tenant.organizationId),
    environment: tenant.environment,
    assetId: asset.id,
    chain: asset.chain,
    toCurrency: corridor.currency.code,
    country: corridor.country,
    paymentMethod: input.paymentMethod,
    amountCurrency,
    rate: priced.rate,
    fromAmount: priced.fromAmount.toString(),
    toAmount: priced.toAmount.toString(),
    fees: priced.fees.map((fee) => ({ type: fee.type, amount_raw: fee.amount.toString() })),
    limits: { currency: corridor.currency.code, min_raw: terms.minRaw.toString(), max_raw: terms.maxRaw.toString() },
    expiresAt: new Date(Date.now() + config.PAYOUT_QUOTE_TTL_SECONDS * 1000),
  });
  await em.flush();
  return quote;
}

export async function findQuote(em: EntityManager, tenant: Tenant, quoteId: string, param = 'quoteId'): Promise<PayoutQuote> {
  const quote = isUuid(quoteId) ? await em.findOne(PayoutQuote, { id: quoteId, organization: tenant.organizationId, environment: tenant.environment }) : null;
  if (!quote) throw errors.notFound('payout quote', quoteId, param);
  return quote;
}

export function presentQuote(quote: PayoutQuote) {
  const asset = assetById(quote.assetId);
  return {
    object: 'payout_quote' as const,
    quoteId: quote.id,
    fromAsset: asset.symbol,
    chain: quote.chain,
    assetId: asset.id,
    fromAmount: toDisplay(quote.fromAmount, asset.decimals),
    fromAmountRaw: quote.fromAmount,
    toCurrency: quote.toCurrency,
    toAmount: toFiatDisplay(quote.toAmount, quote.toCurrency),
    toAmountRaw: quote.toAmount,
    amountCurrency: quote.amountCurrency,
    rate: quote.rate,
    fees: quote.fees.map((fee) => ({ type: fee.type, amount: toDisplay(fee.amount_raw, asset.decimals), amountRaw: fee.amount_raw, asset: asset.symbol })),
    country: quote.country,
    paymentMethod: quote.paymentMethod,
    limits: { currency: quote.limits.currency, min: toFiatDisplay(quote.limits.min_raw, quote.limits.currency), max: toFiatDisplay(quote.limits.max_raw, quote.limits.currency) },
    expiresAt: iso(quote.expiresAt),
    createdAt: iso(quote.createdAt),
  };
}
