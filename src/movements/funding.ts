import type { EntityManager } from '@mikro-orm/postgresql';
import { priceSourceFor, usdValue } from '../catalogue/prices';
import { assetById, findChain, type AssetInfo, type ChainId } from '../catalogue/service';
import type { ChainNodes } from '../chains/nodes';
import type { FeeLevel, FeeMarket } from '../chains/provider';
import { GWEI_DECIMALS } from '../chains/fees';
import type { Config } from '../config';
import { WalletBalance } from '../custody/entities';
import type { Tenant } from '../custody/service';
import { GasStation, Sponsorship, STRATEGY_FEE_LEVEL, type FundingModel } from '../gas-stations/entities';
import { stationLimits } from '../gas-stations/limits';
import { withArticle } from '../shared/articles';
import { errors } from '../shared/errors';
import { Money, toDisplay } from '../shared/money';
import { accountFeeTerms, type StoredFeeTerms } from './fee-terms';
import type { MovementInitiator } from './gate';

/**
 * The funding choice: who pays a movement's network fee, the wallet itself or a gas station (the
 * organization's own, else the platform's sponsorship), and whether that payer can now. Below the
 * money domains: a send (transactions) chooses its payer here, and the gas stations, which send
 * through transactions, provide the payment itself (FeeSponsor), so neither domain imports the other.
 * It reads the stations and their sponsorships as rows (gas-stations/entities, limits), never their services.
 */

// The models are a column of the sponsorships the gas stations record.
export { FUNDING_MODELS, type FundingModel } from '../gas-stations/entities';

/** A sponsored fee's payer: the model and the station that pays. */
export interface Funding {
  model: FundingModel;
  station: GasStation;
}

/** Why a way of paying a fee is not available now: the estimate's unavailable_reason and the 400's details.reason. */
export type UnavailableReason =
  | 'unsupported_chain'
  | 'no_gas_station'
  | 'sponsorship_not_configured'
  | 'gas_price_above_ceiling'
  | 'insufficient_station_balance'
  | 'daily_budget_exhausted'
  | 'no_usd_price';

export interface FundingAssessment {
  model: FundingModel;
  available: boolean;
  reason: UnavailableReason | null;
  message: string;
  /** The station that would pay (for provider sponsorship, the platform's). */
  station: GasStation | null;
  /** What paying costs the station, native base units: the fuel plus its own fee limit for sending it; null before a station is known. */
  cost: bigint | null;
}

/** What a sponsored fee costs: the fuel (the sponsored transaction's fee), and the price it pays in the chain's fee unit. */
export interface SponsoredFee {
  fuel: bigint;
  /** gwei per gas (Ethereum), or the whole fee in sun / lamports: what a station's max_gas_price caps. */
  priceInFeeUnit: string;
}

/** The fuel of a sponsored fee signed with `terms`, and its price as a station's max_gas_price caps it. */
export const sponsoredFee = (terms: StoredFeeTerms, feeLimit: bigint): SponsoredFee => ({
  fuel: feeLimit,
  priceInFeeUnit: terms.model === 'eip1559' ? toDisplay(terms.maxFeePerGas, GWEI_DECIMALS) : feeLimit.toString(),
});

const SPONSORED_CHAINS: readonly ChainId[] = ['ethereum', 'tron', 'solana'];
const nativeOf = (chain: ChainId): AssetInfo => assetById(findChain(chain).nativeAssetId);

/** The fee level a sponsored fee is priced at: the caller's, else the paying station's strategy. */
export const sponsoredLevel = (station: GasStation | null, requested: FeeLevel | undefined): FeeLevel => requested ?? (station ? STRATEGY_FEE_LEVEL[station.gasStrategy] : 'medium');

/** The stations that could pay a fee on `chain` for `tenant`: its own, and the platform's when configured. */
export async function sponsoringStations(em: EntityManager, config: Config, tenant: Tenant, chain: ChainId) {
  const find = (organizationId: string) => em.findOne(GasStation, { organization: organizationId, environment: tenant.environment, chain, status: 'active' }, { populate: ['wallet'] });
  return {
    customer: await find(tenant.organizationId),
    provider: providerConfigured(config) ? await find(config.HEDGE_PAYMASTER_ORGANIZATION_ID!) : null,
  };
}

const providerConfigured = (config: Config) => config.HEDGE_PAYMASTER_ORGANIZATION_ID !== undefined;

/**
 * Whether `model` can pay `fee` on `chain` now, and if not why: the chain is sponsored at all, the
 * station exists, the price is under its max_gas_price, its ledger holds the fuel plus its own fee
 * for sending it, the fuel fits the station's daily budget (max_gas_price and budget the station's
 * own or the deployment's defaults: stationLimits), and for provider sponsorship the USD value fits
 * the organization's daily budget. Under sponsorFee's locks, the sums read the charges of every
 * sponsorship committed before, so two cannot both spend the last of a budget.
 */
export async function assessFunding(
  em: EntityManager,
  config: Config,
  tenant: Tenant,
  chain: ChainId,
  market: FeeMarket,
  model: FundingModel,
  station: GasStation | null,
  fee: SponsoredFee,
  fuelLevel?: FeeLevel,
): Promise<FundingAssessment> {
  let cost: bigint | null = null;
  const refuse = (reason: UnavailableReason, message: string): FundingAssessment => ({ model, available: false, reason, message, station, cost });
  if (!SPONSORED_CHAINS.includes(chain)) return refuse('unsupported_chain', `${chain} fees are not sponsored: ${withArticle(chain)} fee is paid by the transaction's own inputs.`);
  if (model === 'provider_sponsorship' && !providerConfigured(config)) return refuse('sponsorship_not_configured', "The platform's sponsorship is not configured.");
  if (!station) {
    return model === 'customer_gas_station'
      ? refuse('no_gas_station', `The organization has no ${chain} gas station in this environment.`)
      : refuse('sponsorship_not_configured', `The platform's sponsorship has no ${chain} gas station in this environment.`);
  }
  const native = nativeOf(chain);
  cost = fee.fuel + accountFeeTerms(market, native, fuelLevel ?? STRATEGY_FEE_LEVEL[station.gasStrategy]).feeLimit;
  const limits = stationLimits(config, station);
  if (new Money(fee.priceInFeeUnit).gt(new Money(limits.maxGasPrice))) {
    return refuse('gas_price_above_ceiling', `The fee's price ${fee.priceInFeeUnit} is above the station's max_gas_price ${limits.maxGasPrice}.`);
  }
  const ledger = await em.findOne(WalletBalance, { wallet: station.wallet.id, assetId: native.id });
  const available = BigInt(ledger?.balance ?? '0') - BigInt(ledger?.locked ?? '0');
  if (available < cost) {
    return refuse('insufficient_station_balance', `The station holds ${toDisplay(available, native.decimals)} ${native.id} available; the fee and its fuel send need ${toDisplay(cost, native.decimals)}.`);
  }
  const [spent] = await em.execute<{ spent: string }[]>(
    `select coalesce(sum(budget_charge), 0)::text as spent from sponsorships where station_id = ? and created_at >= date_trunc('day', now() at time zone 'UTC') at time zone 'UTC'`,
    [station.id],
  );
  const left = limits.dailyBudget - BigInt(spent!.spent);
  if (cost > left) {
    return refuse('daily_budget_exhausted', `The station's daily sponsorship budget has ${toDisplay(left > 0n ? left : 0n, native.decimals)} ${native.id} left today (UTC); this fee needs ${toDisplay(cost, native.decimals)}.`);
  }
  if (model === 'provider_sponsorship') {
    const usd = usdValue(priceSourceFor(config, tenant.environment), native, cost);
    if (usd === null) return refuse('no_usd_price', `No USD price of ${native.id} is known, and the platform's sponsorship budget is in USD.`);
    const [row] = await em.execute<{ spent: string }[]>(
      `select coalesce(sum(budget_charge_usd::numeric), 0)::text as spent from sponsorships
        where organization_id = ? and environment = ? and funding_model = 'provider_sponsorship' and created_at >= date_trunc('day', now() at time zone 'UTC') at time zone 'UTC'`,
      [tenant.organizationId, tenant.environment],
    );
    const usdLeft = new Money(config.HEDGE_PAYMASTER_DAILY_BUDGET_USD).minus(row!.spent);
    if (new Money(usd).gt(usdLeft)) {
      return refuse('daily_budget_exhausted', `The platform's daily sponsorship budget has ${Money.max(usdLeft, 0).toFixed()} USD left today (UTC) for this organization; this fee needs ${usd}.`);
    }
  }
  return { model, available: true, reason: null, message: 'Available', station, cost };
}

/**
 * Who pays a sponsored fee: the organization's own station on the chain when it has one (never
 * silently the platform instead), else the platform's sponsorship when configured. 400
 * `sponsorship_unavailable` with the reason when neither can pay it now.
 */
export async function chooseFunding(em: EntityManager, config: Config, tenant: Tenant, chain: ChainId): Promise<Funding> {
  if (!SPONSORED_CHAINS.includes(chain)) {
    throw errors.invalid('sponsorship_unavailable', `${chain} fees are not sponsored: ${withArticle(chain)} fee is paid by the transaction's own inputs.`, {
      param: 'sponsor',
      details: { reason: 'unsupported_chain' },
    });
  }
  const stations = await sponsoringStations(em, config, tenant, chain);
  if (stations.customer) return { model: 'customer_gas_station', station: stations.customer };
  if (stations.provider) return { model: 'provider_sponsorship', station: stations.provider };
  throw errors.invalid('sponsorship_unavailable', `The organization has no ${chain} gas station in this environment, and the platform's sponsorship is not configured for ${chain}.`, {
    param: 'sponsor',
    details: { reason: 'no_gas_station' },
  });
}

/** A send whose fee a gas station pays: where the fuel goes, how much, the market it was priced at, and the send it fuels. */
export interface SponsoredSend {
  senderAddress: string;
  fee: SponsoredFee;
  market: FeeMarket;
  transactionId: string;
}

/**
 * Pays a sponsored send's fee in the caller's transaction: the station's fuel send and the sponsorship
 * whose workflow starts the send once the fuel is confirmed (gas-stations/sponsorship.ts sponsorFee).
 * The entry points hand it to the sending machinery (AppDeps.feeSponsor, the activities' deps), since
 * the station's fuel is itself a send.
 */
export type FeeSponsor = (em: EntityManager, config: Config, chains: ChainNodes, initiator: MovementInitiator, funding: Funding, send: SponsoredSend) => Promise<{ id: string }>;

/** Of these sponsorships, those whose fuel is still on its way: their sends wait for the sponsorship's workflow to start them. */
export async function sponsorshipsFunding(em: EntityManager, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  return new Set((await em.find(Sponsorship, { id: { $in: [...ids] }, status: 'funding' })).map((sponsorship) => sponsorship.id));
}
