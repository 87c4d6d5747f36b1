import { BaseUnitAmount, DeprecatedNetwork, DisplayAmount, Timestamp, z } from '../shared/schemas';

export const EstimateFeeBody = z
  .object({
    wallet_id: z.string().uuid().openapi({ description: 'The sending wallet, of the key\'s organization and environment' }),
    to_address: z.string().trim().min(1).max(128).openapi({ description: "The recipient, valid for the wallet's chain and the key's network" }),
    amount: DisplayAmount.openapi({ description: 'Display units of the asset, positive, at most the asset\'s decimals' }),
    asset: z.string().trim().min(1).max(32).openapi({ description: "An asset id (USDC_ETH), or a bare symbol (USDC) resolved on the wallet's chain" }),
    sponsor: z.boolean().optional().openapi({ description: 'Ask for sponsorship; the provider_sponsorship funding option says whether it is available' }),
    treat_as_gross_amount: z
      .boolean()
      .optional()
      .openapi({ description: 'The fee comes out of the amount (native assets only; 400 gross_amount_native_only for a token)' }),
    network: DeprecatedNetwork,
  })
  .strict()
  .openapi('EstimateFeeRequest');

const DisplayString = z.string().openapi({ description: 'Display-unit decimal as a string', example: '0.000141' });

export const BreakdownItem = z
  .object({
    key: z.string().openapi({ description: 'Machine identifier: fee_rate, vsize, gas_limit, base_fee, priority_fee, max_fee_per_gas, bandwidth, energy, energy_fee, fee_limit, signatures' }),
    label: z.string(),
    unit: z.string().openapi({ description: 'An asset symbol, sat/vB, vB, gas, gwei, energy, lamports, signatures' }),
    value: z.string().openapi({ description: 'In that unit, exact' }),
  })
  .openapi('BreakdownItem');

export const FundingOption = z
  .object({
    atomic_collection: z.boolean(),
    available: z.boolean(),
    execution_control: z.string(),
    execution_path: z.string(),
    fee_asset_amount: DisplayString,
    fee_asset_amount_raw: BaseUnitAmount,
    fee_asset_id: z.string(),
    funding_model: z.enum(['provider_sponsorship', 'customer_gas_station']),
    indicative: z.boolean().openapi({ description: 'An estimate rather than a firm quote' }),
    network_fee_amount: DisplayString,
    network_fee_amount_raw: BaseUnitAmount,
    network_fee_asset_id: z.string(),
    network_fee_usd: z.string().nullable(),
    quote_expires_at: Timestamp,
    recipient_amount: DisplayString,
    recipient_amount_raw: BaseUnitAmount,
    status: z.string(),
    status_label: z.string(),
    total_debit_amount: DisplayString,
    total_debit_amount_raw: BaseUnitAmount,
    unavailable_reason: z.string().nullable().openapi({ description: 'Why available is false: sponsorship_not_configured, no_gas_station' }),
  })
  .openapi('FundingOption');

export const FeeLevelDetail = z
  .object({
    amount: DisplayString.openapi({ description: "The fee, in the chain's native asset" }),
    amount_raw: BaseUnitAmount,
    asset_id: z.string().openapi({ description: "The chain's native asset: fees are always paid in it" }),
    breakdown: z.array(BreakdownItem),
    estimated_time_seconds: z.number().int(),
    funding_options: z.array(FundingOption),
    recipient_amount: DisplayString.openapi({ description: 'What the recipient gets, in the asset sent' }),
    recipient_amount_raw: BaseUnitAmount,
    total_debit_amount: DisplayString.openapi({ description: 'What the wallet gives of the asset sent (native: amount plus fee in net mode)' }),
    total_debit_amount_raw: BaseUnitAmount,
    usd_value: z.string().nullable().openapi({ description: "The fee in USD, from the environment's price source; null without one" }),
  })
  .openapi('FeeLevelDetail');

export const FeeEstimation = z
  .object({
    fee_levels: z.object({ low: FeeLevelDetail, medium: FeeLevelDetail, high: FeeLevelDetail }),
    recommended: z.enum(['low', 'medium', 'high']),
  })
  .openapi('FeeEstimation');
