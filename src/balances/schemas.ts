import { BaseUnitAmount, z } from '../shared/schemas';
import { isBaseUnitAmount } from '../shared/money';
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

/** The codes GET /v1/balances shows (USD, BTC, USDT, USDC); the internal names usd and sat are accepted too. */
const CURRENCY_CODES: Record<string, (typeof BALANCE_CURRENCIES)[number]> = { USD: 'usd', BTC: 'sat', USDT: 'usdt', USDC: 'usdc', usd: 'usd', sat: 'sat' };

export const SandboxCreditBody = z
  .object({
    amount: z
      .union([BaseUnitAmount, z.number().int().positive().max(Number(MAX_SANDBOX_CREDIT))])
      // zod runs a refinement after a failed union too: a string that is no integer ("AAA") must not reach BigInt.
      .refine(
        (value) => (typeof value === 'number' || isBaseUnitAmount(value)) && BigInt(value) > 0n && BigInt(value) <= MAX_SANDBOX_CREDIT,
        `must be a positive integer of at most ${MAX_SANDBOX_CREDIT}`,
      )
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
    reference: z.string().trim().min(1).max(255).optional().openapi({ description: 'Makes the credit idempotent' }),
  })
  .strict()
  .openapi('SandboxBalanceCreditRequest');
