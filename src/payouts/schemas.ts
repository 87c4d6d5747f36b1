import { ASSETS, CHAIN_IDS } from '../catalogue/service';
import { ListQuery } from '../shared/pagination';
import { BaseUnitAmount, DisplayAmount, text, Timestamp, z } from '../shared/schemas';
import { CORRIDORS, SOURCE_ASSETS } from './corridors';
import { PAYMENT_METHODS, RAIL_OUTCOMES, REFUND_REASONS, REFUND_STATUSES, TRIP_STATUSES } from './entities';

/**
 * Document-only hints of what the quote service accepts (it answers 400 unsupported_asset or
 * unsupported_corridor, naming the field, for anything else): the symbols it funds payouts with, in any
 * case as it reads them, and the corridors' countries and currencies. Which asset goes with which
 * chain, currency and method with which country, and the corridor's limits stay in the service.
 */
const SOURCE_SYMBOLS = [...new Set(ASSETS.filter((asset) => asset.id in SOURCE_ASSETS).map((asset) => asset.symbol))];
const COUNTRIES = [...new Set(CORRIDORS.map((corridor) => corridor.country))];
const CURRENCIES = [...new Set(CORRIDORS.map((corridor) => corridor.currency.code))];
/** `^(usdt|btc)$` in any case, as a pattern any JSON Schema validator reads (no flags). */
const anyCase = (words: readonly string[]) =>
  `^(${words.map((word) => [...word].map((letter) => `[${letter.toUpperCase()}${letter.toLowerCase()}]`).join('')).join('|')})$`;

export const PayoutQuoteRequest = z
  .object({
    fromAsset: text(1, 10).openapi({ description: 'The asset sent, by symbol: USDT, USDC or BTC', pattern: anyCase(SOURCE_SYMBOLS), example: 'USDT' }),
    chain: z.enum(CHAIN_IDS).openapi({ description: 'Its chain: USDT on ethereum or tron, USDC on ethereum or solana, BTC on bitcoin' }),
    amount: DisplayAmount.openapi({ description: 'In the asset sent, or with amountCurrency = toCurrency in the currency paid out' }),
    amountCurrency: z
      .string()
      .min(1)
      .max(10)
      .optional()
      .openapi({ description: 'What amount is in: the asset symbol (default) or toCurrency', pattern: anyCase([...SOURCE_SYMBOLS, ...CURRENCIES]) }),
    toCurrency: z
      .string()
      .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as "NGN"')
      .openapi({ description: "The corridor's currency", enum: CURRENCIES, example: 'NGN' }),
    country: z.string().regex(/^[A-Z]{2}$/, 'must be an ISO 3166-1 alpha-2 code such as "NG"').openapi({ description: 'A corridor', enum: COUNTRIES, example: 'NG' }),
    paymentMethod: z.enum(PAYMENT_METHODS),
  })
  .strict()
  .openapi('PayoutQuoteRequest');

export const PayoutQuoteObject = z
  .object({
    object: z.literal('payout_quote'),
    quoteId: z.uuid(),
    fromAsset: z.string(),
    chain: z.enum(CHAIN_IDS),
    assetId: z.string(),
    fromAmount: DisplayAmount.openapi({ description: 'What to send, fees included' }),
    fromAmountRaw: BaseUnitAmount,
    toCurrency: z.string(),
    toAmount: z.string().openapi({ description: 'What the beneficiary receives, with exactly the currency\'s minor digits' }),
    toAmountRaw: z.string().openapi({ description: "Minor units of toCurrency" }),
    amountCurrency: z.string(),
    rate: z.string().openapi({ description: 'Units of toCurrency per one unit of the asset, after the spread (6 decimal places, rounded down)' }),
    fees: z.array(z.object({ type: z.enum(['service_fee', 'network_fee']), amount: DisplayAmount, amountRaw: BaseUnitAmount, asset: z.string() })),
    country: z.string(),
    paymentMethod: z.enum(PAYMENT_METHODS),
    limits: z.object({ currency: z.string(), min: z.string(), max: z.string() }).openapi({ description: "The corridor's per-payout limits, in toCurrency" }),
    expiresAt: Timestamp,
    createdAt: Timestamp,
  })
  .openapi('PayoutQuote');

export const PayoutBeneficiary = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('bank'), accountNumber: text(1, 34), bankCode: text(1, 11), accountName: text(1, 100) }).strict(),
    z
      .object({
        type: z.literal('mobile_money'),
        phoneNumber: text(1, 16).openapi({ description: 'E.164, of the corridor\'s country', example: '+254712345678' }),
        network: text(1, 20).openapi({ example: 'MPESA' }),
        accountName: text(1, 100),
      })
      .strict(),
  ])
  .openapi('PayoutBeneficiary');

export const PayoutInitializeRequest = z
  .object({
    quoteId: text(1, 64),
    reference: z
      .string()
      .regex(/^[A-Za-z0-9._:-]{1,100}$/, 'must be 1 to 100 of A-Z a-z 0-9 . _ : -')
      .openapi({ description: 'Your idempotency key: the same reference returns the same trip' }),
    beneficiary: PayoutBeneficiary,
    refundAddress: text(1, 128).optional().openapi({ description: "Where refunds go (late payments, underpayments beyond the margin) when refunds are configured: an address on the quote's chain" }),
  })
  .strict()
  .openapi('PayoutInitializeRequest');
export type PayoutInitializeRequest = z.infer<typeof PayoutInitializeRequest>;

const FiatAmount = z.string().regex(/^\d+(\.\d+)?$/).openapi({ description: "Decimal of the payout currency with exactly its minor units ('155000.00'; UGX '370000')" });
const MinorUnits = z.string().regex(/^\d+$/).openapi({ description: "Integer in the payout currency's minor units" });

export const PayoutTripObject = z
  .object({
    object: z.literal('payout_trip'),
    tripId: z.uuid(),
    reference: z.string(),
    status: z.enum(TRIP_STATUSES),
    quoteId: z.uuid(),
    fromAsset: z.string(),
    assetId: z.string(),
    chain: z.enum(CHAIN_IDS),
    network: z.string(),
    depositAddress: z.string().openapi({ description: "The payout desk's address for this trip: send amountToSend of the asset here before expiresAt" }),
    amountToSend: DisplayAmount,
    amountToSendRaw: BaseUnitAmount,
    rate: z.string(),
    toCurrency: z.string(),
    toAmount: FiatAmount.openapi({ description: 'The quoted fiat amount' }),
    toAmountRaw: MinorUnits,
    payoutAmount: FiatAmount.nullable().openapi({ description: 'What the rail is asked to pay: toAmount, or pro rata on an underpayment within the margin' }),
    payoutAmountRaw: MinorUnits.nullable(),
    amountReceived: DisplayAmount.nullable().openapi({ description: 'What the funding deposits add up to (use it on underpayment)' }),
    amountReceivedRaw: BaseUnitAmount.nullable(),
    creditedAmount: DisplayAmount.nullable().openapi({ description: "Credited to the organization's balance in the asset: an overpayment's excess, a failed payout's funds" }),
    creditedAmountRaw: BaseUnitAmount.nullable(),
    country: z.string(),
    paymentMethod: z.enum(PAYMENT_METHODS),
    beneficiary: z.union([
      z.object({ type: z.literal('bank'), accountNumber: z.string().openapi({ description: "All but the last four digits masked ('******6789')" }), bankCode: z.string(), accountName: z.string() }),
      z.object({ type: z.literal('mobile_money'), phoneNumber: z.string().openapi({ description: "All but the last four digits masked ('*********5678')" }), network: z.string(), accountName: z.string() }),
    ]),
    refundAddress: z.string().nullable(),
    rail: z.string().nullable(),
    failure_reason: z.string().nullable(),
    holdReason: z.string().nullable(),
    expiresAt: Timestamp,
    assetReceivedAt: Timestamp.nullable(),
    assetConfirmedAt: Timestamp.nullable(),
    completedAt: Timestamp.nullable(),
    timeToFinishMs: z.number().int().nullable().openapi({ description: 'From initialization to the final status; null while the trip runs' }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    workflow_id: z.string().openapi({ description: 'payout-trip-<tripId>: the Temporal workflow carrying the trip, its late-payment watch included' }),
    late_payment_watch_until: Timestamp.nullable().openapi({
      description:
        'Once the trip has ended, its workflow watches the deposit address for late payments until this time (PAYOUT_LATE_PAYMENT_WATCH_HOURS after completedAt; a late deposit still confirming then is followed to its resolution); null before the trip ends and once the watch is over. Not in event payloads.',
    }),
  })
  .openapi('PayoutTrip');

export const PayoutRefundObject = z
  .object({
    refundId: z.uuid(),
    status: z.enum(REFUND_STATUSES).openapi({ description: 'refund_pending while its send is on its way (a failed send is replaced by a new one, PAYOUT_REFUND_ATTEMPTS in all); refunded once a send settled; refund_failed when none could be made: the money is held for an operator' }),
    reason: z.enum(REFUND_REASONS),
    assetId: z.string(),
    amount: DisplayAmount.openapi({ description: 'Returned; on a native coin the fee comes out of it' }),
    amountRaw: BaseUnitAmount,
    toAddress: z.string(),
    transactionId: z.uuid().openapi({ description: 'The current send (GET /v1/transactions/:id is the desk\'s, not yours)' }),
    txHash: z.string().nullable(),
    attempts: z.number().int().openapi({ description: 'Sends made, the current one included' }),
    failure_reason: z.string().nullable(),
    createdAt: Timestamp,
    completedAt: Timestamp.nullable(),
  })
  .openapi('PayoutRefund');

export const PayoutTripWithTimeline = PayoutTripObject.extend({
  refunds: z.array(PayoutRefundObject).openapi({ description: 'Money sent back to refundAddress (an underpayment beyond the margin, late payments), oldest first' }),
  timeline: z.array(
    z.object({
      name: z.string().openapi({
        description:
          'A status (awaiting_deposit, funded, processing, success, failed, expired, held) or a movement of the money (asset_confirmed, excess_credited, late_payment_received, refund_pending, refund_retried, refunded, refund_failed, resolved_by_operator...)',
      }),
      at: Timestamp,
      elapsedMs: z.number().int().openapi({ description: 'Since the trip was initialized' }),
      details: z.record(z.string(), z.unknown()),
    }),
  ),
}).openapi('PayoutTripWithTimeline');

export const TripParams = z.object({ tripId: text(1, 64) });
export const ReferenceParams = z.object({ reference: text(1, 100) });

export const TripListQuery = ListQuery.extend({
  status: z.enum(TRIP_STATUSES).optional(),
  createdFrom: z.iso.datetime({ offset: true }).optional().openapi({ description: 'Trips created at or after this instant' }),
  createdTo: z.iso.datetime({ offset: true }).optional().openapi({ description: 'Trips created at or before this instant' }),
});

export const SandboxPayoutDepositBody = z
  .object({
    amount: DisplayAmount.openapi({ description: "Display units of the trip's asset" }),
    confirmations: z.number().int().min(0).max(100).optional().openapi({ description: 'Blocks to mine at once after the transfer (each one more confirmation); omitted: the transfer waits in the mempool for the next block' }),
  })
  .strict()
  .openapi('SandboxPayoutDepositRequest');

export const SandboxPayoutDepositObject = z
  .object({
    object: z.literal('sandbox_payout_deposit'),
    tripId: z.uuid(),
    depositAddress: z.string(),
    assetId: z.string(),
    amount: DisplayAmount,
    amountRaw: BaseUnitAmount,
    txHash: z.string(),
    blocksMined: z.number().int(),
  })
  .openapi('SandboxPayoutDeposit');

export const SandboxPayoutOutcomeBody = z
  .object({
    outcome: z.enum(RAIL_OUTCOMES).openapi({ description: 'What the sandbox rail answers for this trip from now on: success pays, failed rejects, blocked is a compliance or risk block, unknown loses the answer (the trip asks again until another outcome is set)' }),
    failureReason: z
      .string()
      .regex(/^[a-z0-9_]{1,100}$/, 'must be a snake_case code such as "account_closed"')
      .optional()
      .openapi({ description: "The failure_reason the rail gives for failed or blocked; default: the rail's own" }),
  })
  .strict()
  .openapi('SandboxPayoutOutcomeRequest');

export const SandboxPayoutOutcomeObject = z
  .object({
    object: z.literal('sandbox_payout_outcome'),
    tripId: z.uuid(),
    outcome: z.enum(RAIL_OUTCOMES),
    failureReason: z.string().nullable(),
    submissions: z.number().int().openapi({ description: 'How often an instruction for this trip reached the rail' }),
    paidAt: Timestamp.nullable(),
  })
  .openapi('SandboxPayoutOutcome');
