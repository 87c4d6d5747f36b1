import { ListQuery } from '../shared/pagination';
import { BaseUnitAmount, DeprecatedNetwork, DisplayAmount, PositiveDisplayAmount, text, Timestamp, trimmedText, z } from '../shared/schemas';
import { REPLACEMENT_KINDS, REPLACEMENT_STATUSES, TRANSACTION_STATUSES } from './entities';

export const EstimateFeeBody = z
  .object({
    wallet_id: z.string().uuid().openapi({ description: 'The sending wallet, of the key\'s organization and environment' }),
    to_address: trimmedText(1, 128).openapi({ description: "The recipient, valid for the wallet's chain and the key's network" }),
    amount: PositiveDisplayAmount.openapi({ description: 'Display units of the asset, positive, at most the asset\'s decimals' }),
    asset: trimmedText(1, 32).openapi({ description: "An asset id (USDC_ETH), or a bare symbol (USDC) resolved on the wallet's chain" }),
    sponsor: z.boolean().optional().openapi({ description: 'Price the fee as sponsored (paid by a gas station): the level amounts are then the sponsored fee and the total debit leaves it out; funding_options say whether each payer can pay it now' }),
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
    execution_control: z.enum(['customer', 'platform']).openapi({ description: "customer: the organization's own gas station pays; platform: the platform's sponsorship" }),
    execution_path: z.enum(['fuel_transfer']).openapi({ description: 'The station sends the sender exactly the fee as a transaction of its own, confirmed before the sponsored one is signed' }),
    fee_asset_amount: DisplayString.openapi({ description: "What paying costs the station: the network fee plus the station's own fee limit for sending it" }),
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
    status: z.enum(['available', 'unavailable']),
    status_label: z.string().openapi({ description: 'Available, or why not in words' }),
    total_debit_amount: DisplayString,
    total_debit_amount_raw: BaseUnitAmount,
    unavailable_reason: z
      .enum(['unsupported_chain', 'no_gas_station', 'sponsorship_not_configured', 'gas_price_above_ceiling', 'insufficient_station_balance', 'daily_budget_exhausted', 'no_usd_price'])
      .nullable()
      .openapi({ description: 'Why available is false (null when available); docs/gas-stations.md' }),
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

export const TransactionInput = z
  .object({
    txid: z.string().length(64).openapi({ description: 'The transaction holding the output: exactly 64 hexadecimal characters' }),
    vout: text(0, 6).openapi({ description: 'The output index, a non-negative integer as a string', example: '0' }),
  })
  .strict()
  .openapi('TransactionInput');

const SatPerVbyte = text(0, 16).openapi({ description: 'Whole sat/vB as a string, at least 1', example: '12' });

export const CreateTransactionBody = z
  .object({
    wallet_id: EstimateFeeBody.shape.wallet_id,
    to_address: EstimateFeeBody.shape.to_address,
    amount: EstimateFeeBody.shape.amount,
    asset: EstimateFeeBody.shape.asset,
    fee_level: z.enum(['low', 'medium', 'high']).optional().openapi({ description: 'Default medium' }),
    fee_rate: SatPerVbyte.optional().openapi({ description: 'Bitcoin only: sat/vB, overrides fee_level' }),
    max_fee_rate: SatPerVbyte.optional().openapi({ description: 'Bitcoin only: sat/vB the effective rate may not exceed (400 fee_rate_above_max)' }),
    fill_fee_from_unselected: z.boolean().optional().openapi({ description: 'Bitcoin only, with inputs: top up from the rest of the wallet when the pinned inputs do not cover amount and fee' }),
    inputs: z.array(TransactionInput).min(1).max(250).optional().openapi({ description: 'Bitcoin coin control: spend exactly these outputs of the wallet (at most 250)' }),
    note: text(0, 1000).optional(),
    sponsor: z.boolean().optional().openapi({ description: "Have the network fee paid by the organization's gas station on the chain (else the platform's sponsorship when configured); 400 sponsorship_unavailable with details.reason when neither can pay it. Not on Bitcoin" }),
    treat_as_gross_amount: EstimateFeeBody.shape.treat_as_gross_amount,
    network: DeprecatedNetwork,
  })
  .strict()
  .openapi('CreateTransactionRequest');

export const CancelTransactionBody = z
  .object({
    fee_level: z.enum(['low', 'medium', 'high']).optional().openapi({ description: "The market level the replacement is priced at (default high), raised to outbid the send's newest candidate by 10%" }),
    max_fee: DisplayAmount.optional().openapi({ description: "The most the replacement's fee may reach, in the chain's native asset: a higher price is refused (400 max_fee_exceeded), nothing replaced" }),
  })
  .strict()
  .openapi('CancelTransactionRequest');

export const SpeedUpTransactionBody = CancelTransactionBody.extend({
  fee_rate: SatPerVbyte.optional().openapi({ description: 'Bitcoin only: sat/vB, overrides fee_level (400 bitcoin_only for an Ethereum send)' }),
})
  .strict()
  .openapi('SpeedUpTransactionRequest');

export const TransactionListQuery = ListQuery.extend({
  wallet_id: z.string().uuid().optional(),
  status: z.enum(TRANSACTION_STATUSES).optional(),
});

export const TransactionParams = z.object({ id: text(1, 64) });

export const TransactionObject = z
  .object({
    id: z.string(),
    object: z.literal('transaction'),
    wallet_id: z.string(),
    chain: z.string(),
    network: z.string(),
    asset: z.string().openapi({ description: 'Symbol' }),
    asset_id: z.string(),
    from_address: z.string().openapi({ description: 'The signing address (Bitcoin: where change returns)' }),
    to_address: z.string(),
    amount: DisplayString,
    amount_raw: BaseUnitAmount,
    recipient_amount: DisplayString.openapi({ description: 'What the recipient gets: the amount, or with treat_as_gross_amount the amount less the fee limit' }),
    recipient_amount_raw: BaseUnitAmount,
    treat_as_gross_amount: z.boolean(),
    fee: DisplayString.nullable().openapi({ description: "The fee paid, in the chain's native asset; null until known (EVM: once mined)" }),
    fee_raw: BaseUnitAmount.nullable(),
    fee_limit: DisplayString.openapi({ description: 'The most the fee can be: locked until the send settles' }),
    fee_limit_raw: BaseUnitAmount,
    fee_asset_id: z.string(),
    fee_level: z.enum(['low', 'medium', 'high']),
    fee_rate: z.string().nullable(),
    max_fee_rate: z.string().nullable(),
    inputs: z.array(TransactionInput).nullable().openapi({ description: 'The pinned inputs, as asked' }),
    fill_fee_from_unselected: z.boolean(),
    inputs_used: z.array(z.object({ txid: z.string(), vout: z.string(), amount: DisplayString, amount_raw: BaseUnitAmount })).openapi({ description: 'Bitcoin: the outputs the send spends' }),
    nonce: z.string().nullable().openapi({ description: 'Ethereum: the account nonce it was signed with' }),
    replacements: z
      .array(
        z.object({
          id: z.string().uuid(),
          kind: z.enum(REPLACEMENT_KINDS).openapi({ description: 'speed_up: the same transfer at a higher fee; cancel: a zero-value transfer back to the sending address (Bitcoin: the inputs paid back to it, less the fee)' }),
          origin: z.enum(['api', 'automatic']).openapi({ description: 'automatic: the send waited FEE_BUMP_AFTER_BLOCKS unmined' }),
          status: z.enum(REPLACEMENT_STATUSES).openapi({ description: 'requested, broadcast, mined (the send settled on it), refused (by the node: its extra lock released) or superseded' }),
          tx_hash: z.string().nullable().openapi({ description: 'Once signed' }),
          fee_limit: DisplayString,
          fee_limit_raw: BaseUnitAmount,
          policy_decision: z.object({ result: z.string(), policy_id: z.string().nullable(), rule_id: z.string().nullable(), action: z.string().nullable() }),
          failure_message: z.string().nullable(),
          created_at: Timestamp,
          broadcast_at: Timestamp.nullable(),
        }),
      )
      .openapi({ description: 'The replacements of this send (speed-up, cancel: same-nonce on Ethereum, BIP-125 on Bitcoin), oldest first; once one is mined, tx_hash, fee and recipient_amount are its' }),
    status: z.enum(TRANSACTION_STATUSES).openapi({ description: 'pending, signed, broadcast, confirming, confirmed or failed; see docs/transactions.md' }),
    tx_hash: z.string().nullable().openapi({ description: "Once signed: the send's own hash, or once a candidate is mined, the mined one's (the original or a replacement; a reorganisation that mines another candidate changes it)" }),
    block_height: z.number().int().nullable(),
    confirmations: z.number().int(),
    required_confirmations: z.number().int(),
    note: z.string(),
    sponsor: z.boolean().openapi({ description: 'A gas station pays the fee' }),
    sponsorship_id: z.string().uuid().nullable().openapi({ description: 'The sponsorship (workflow `sponsorship-<id>`) that funds the fee; the send stays pending until its fuel is confirmed' }),
    policy_decision: z.object({ result: z.string(), policy_id: z.string().nullable(), rule_id: z.string().nullable(), action: z.string().nullable() }),
    failure_reason: z.string().nullable(),
    failure_message: z.string().nullable(),
    workflow_id: z.string().openapi({ description: 'transaction-<id>: the Temporal workflow carrying the send' }),
    created_at: Timestamp,
    updated_at: Timestamp,
    broadcast_at: Timestamp.nullable(),
    confirmed_at: Timestamp.nullable(),
    failed_at: Timestamp.nullable(),
    mined_after_failure_at: Timestamp.nullable().openapi({
      description: 'When a block was seen mining this send after it had failed (its lock released): it was debited what the chain shows and transaction.mined_after_failure raised; failed_at keeps when it was failed',
    }),
  })
  .openapi('Transaction');
