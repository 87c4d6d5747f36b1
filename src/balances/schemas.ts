import { BaseUnitAmount, trimmedText, z } from '../shared/schemas';
import { BALANCE_CURRENCIES } from './entities';

export const CompanyBalanceObject = z
  .object({
    object: z.literal('company_balance'),
    currency: z.enum(['USD', 'BTC', 'USDT', 'USDC']),
    unit: z.enum(['cent', 'sat', 'micro']).openapi({ description: 'Amounts are integers in this unit (micro: 10^-6 of a USDT or USDC)' }),
    available: BaseUnitAmount,
    reserved: BaseUnitAmount.openapi({ description: 'Held for operations in flight' }),
    total: BaseUnitAmount,
  })
  .openapi('CompanyBalance');

/** One sandbox credit at most: 10^15 cents ($10 trillion), sats (10 million BTC) or micro-units ($1 billion). */
export const MAX_SANDBOX_CREDIT = 10n ** 15n;
/** 1 to MAX_SANDBOX_CREDIT as a string: up to 15 digits, or 10^15 itself; the document says it as validation checks it. */
export const SANDBOX_CREDIT_PATTERN = new RegExp(`^([1-9]\\d{0,${MAX_SANDBOX_CREDIT.toString().length - 2}}|${MAX_SANDBOX_CREDIT})$`);

/** The codes GET /v1/balances shows (USD, BTC, USDT, USDC); the internal names usd and sat are accepted too. */
const CURRENCY_CODES: Record<string, (typeof BALANCE_CURRENCIES)[number]> = { USD: 'usd', BTC: 'sat', USDT: 'usdt', USDC: 'usdc', usd: 'usd', sat: 'sat' };

export const SandboxCreditBody = z
  .object({
    amount: z
      .union([
        z.string().regex(SANDBOX_CREDIT_PATTERN, `must be a positive integer of at most ${MAX_SANDBOX_CREDIT}`),
        z.number().int().positive().max(Number(MAX_SANDBOX_CREDIT)),
      ])
      .transform((value) => BigInt(value))
      .openapi({ description: `Integer amount in cents (USD) or sats (BTC), at most ${MAX_SANDBOX_CREDIT}` }),
    currency: z
      .enum(['USD', 'BTC', 'USDT', 'USDC', 'usd', 'sat'])
      .default('USD')
      .transform((code) => CURRENCY_CODES[code]!)
      .openapi({
        description:
          'USD (the company balance, cents), BTC (the Lightning balance, sats), USDT or USDC (payout credits, micro-units), as GET /v1/balances shows them; usd and sat are accepted too',
      }),
    reference: trimmedText(1, 255).optional().openapi({ description: 'Makes the credit idempotent' }),
  })
  .strict()
  .openapi('SandboxBalanceCreditRequest');
