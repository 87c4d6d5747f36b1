import { BaseUnitAmount, z } from '../shared/schemas';
import { BALANCE_CURRENCIES } from './entities';

export const CompanyBalanceObject = z
  .object({
    object: z.literal('company_balance'),
    currency: z.enum(['USD', 'BTC']),
    unit: z.enum(['cent', 'sat']).openapi({ description: 'Amounts are integers in this unit' }),
    available: BaseUnitAmount,
    reserved: BaseUnitAmount.openapi({ description: 'Held for operations in flight' }),
    total: BaseUnitAmount,
  })
  .openapi('CompanyBalance');

export const SandboxCreditBody = z
  .object({
    amount: z.union([BaseUnitAmount, z.number().int().positive().max(Number.MAX_SAFE_INTEGER)]).openapi({
      description: 'Integer amount in cents (usd) or sats (sat)',
    }),
    currency: z.enum(BALANCE_CURRENCIES).default('usd'),
    reference: z.string().trim().min(1).max(255).optional().openapi({ description: 'Makes the credit idempotent' }),
  })
  .strict()
  .openapi('SandboxBalanceCreditRequest');
