import { centsToDecimalString, decimalStringToCents, isDisplayAmount } from '../shared/money';
import { Email, MinorUnitNumber, resultEnvelopeSchema, text, Timestamp, trimmedText, z } from '../shared/schemas';
import { CARD_STATUSES, CARD_TRANSACTION_STATUSES, CARD_TRANSACTION_TYPES, CARD_TYPES } from './entities';
import { ISO_ALPHA3_COUNTRIES } from './countries';

const ID_TYPES = ['national_id', 'passport', 'drivers_license'] as const;
const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A real calendar date (no 2026-02-30), after 1900 and before today. */
function isPastDate(value: string): boolean {
  const match = DATE_PATTERN.exec(value);
  if (!match) return false;
  const date = new Date(`${value}T00:00:00Z`);
  return date.toISOString().slice(0, 10) === value && Number(match[1]) >= 1900 && date.getTime() < Date.now();
}

const trimmed = (max = 200) => trimmedText(1, max);

/**
 * A recent instant (a purchase, a terms acceptance): zod's RFC 3339 pattern (real calendar days, Z or
 * an offset), years 2000 to 2999 as written. The whole pattern is in the document: a generator reading
 * `format: date-time` and a year prefix alone finds no value of both.
 */
const OCCURRED_AT_PATTERN = new RegExp(`^(?=2\\d{3}-)${z.regexes.datetime({ offset: true }).source.slice(1)}`);

/**
 * The customer's acceptance of the card program's user terms (Celtic Bank's Authorized User Terms, where the live issuer's
 * program needs it: STRIPE_ISSUING_CELTIC_TERMS): when, and from which IP address and browser the customer accepted.
 */
export const TermsAcceptanceInput = z
  .object({
    accepted_at: Timestamp.max(64).regex(OCCURRED_AT_PATTERN, 'must be an RFC 3339 timestamp of the years 2000 to 2999'),
    ip: z.union([z.ipv4(), z.ipv6()]).openapi({ description: 'The IP address the customer accepted from' }),
    user_agent: text(1, 500).optional(),
  })
  .strict()
  .openapi('CardTermsAcceptance');

export const CustomerInput = z
  .object({
    customer_type: z.enum(['individual', 'business']),
    first_name: trimmed(),
    last_name: trimmed(),
    email: Email,
    phone_number: z.string().regex(/^\d{4,15}$/, 'phone_number is the local number, digits only, without the country code'),
    dial_code: z.string().regex(/^\+\d{1,4}$/, 'dial_code is the international code with a leading +, e.g. +1'),
    date_of_birth: z
      .string()
      .refine(isPastDate, 'date_of_birth must be a real past date, YYYY-MM-DD')
      .openapi({ format: 'date', description: 'A past date' }),
    id_type: z.enum(ID_TYPES),
    id_number: trimmed(64),
    line1: trimmed(),
    line2: text(0, 200).optional(),
    city: trimmed(),
    state: trimmed(100),
    postal_code: trimmed(20),
    country: z
      .string()
      .refine((value) => ISO_ALPHA3_COUNTRIES.has(value), 'country must be an ISO 3166-1 alpha-3 code, e.g. USA')
      .openapi({ enum: [...ISO_ALPHA3_COUNTRIES] }),
    terms_acceptance: TermsAcceptanceInput.optional(),
  })
  .superRefine((customer, ctx) => {
    // What varies by ID type and country: document formats and US address formats.
    if (customer.id_type === 'passport' && !/^[A-Z0-9]{6,9}$/i.test(customer.id_number)) {
      ctx.addIssue({ code: 'custom', path: ['id_number'], message: 'A passport number is 6 to 9 letters or digits' });
    }
    if (customer.country === 'USA') {
      if (customer.id_type === 'national_id' && !/^\d{3}-?\d{2}-?\d{4}$/.test(customer.id_number)) {
        ctx.addIssue({ code: 'custom', path: ['id_number'], message: 'A US national_id is a 9-digit SSN' });
      }
      if (!/^[A-Z]{2}$/.test(customer.state)) ctx.addIssue({ code: 'custom', path: ['state'], message: 'A US state is its 2-letter code' });
      if (!/^\d{5}(-\d{4})?$/.test(customer.postal_code)) ctx.addIssue({ code: 'custom', path: ['postal_code'], message: 'A US postal_code is a ZIP code' });
    }
  })
  .openapi('CardCustomerInput');
export type CustomerInput = z.infer<typeof CustomerInput>;

/** The largest card limit, 9,999,999,999,999.99 dollars: 13 digits of dollars, so the document's pattern says the cap exactly. */
const MAX_LIMIT_CENTS = 10n ** 15n - 1n;
/** A card limit as the document states it: more than zero, whole cents, at most MAX_LIMIT_CENTS. */
const CARD_LIMIT_PATTERN = /^(?!0(\.0{1,2})?$)(0|[1-9]\d{0,12})(\.\d{1,2})?$/;

/** A card limit in decimal dollars: at most two decimal places, more than zero, at most MAX_LIMIT_CENTS cents. */
const DecimalLimit = z
  .string()
  .superRefine((value, ctx) => {
    if (value.length > 32 || !isDisplayAmount(value)) {
      ctx.addIssue({ code: 'custom', message: 'a decimal string in the card currency, e.g. "250.00"' });
      return;
    }
    if ((value.split('.')[1] ?? '').length > 2) {
      ctx.addIssue({ code: 'custom', message: 'at most two decimal places (whole cents), e.g. "250.00"' });
      return;
    }
    const cents = decimalStringToCents(value);
    if (cents <= 0n) ctx.addIssue({ code: 'custom', message: 'a card limit must be more than zero' });
    else if (cents > MAX_LIMIT_CENTS) ctx.addIssue({ code: 'custom', message: `a card limit is at most ${centsToDecimalString(MAX_LIMIT_CENTS)}` });
  })
  .openapi({ pattern: CARD_LIMIT_PATTERN.source, example: '250.00', description: 'Dollars as a decimal string: more than zero, at most two decimal places, at most 9999999999999.99' });

export const CreateCardBody = z
  .object({
    amount: MinorUnitNumber,
    card_type: z.enum(CARD_TYPES),
    currency: z
      .string()
      .transform((value) => value.toUpperCase())
      .pipe(z.literal('USD'))
      .openapi({ pattern: '^[Uu][Ss][Dd]$', description: 'USD, in any case' }),
    name: trimmed(),
    customer: CustomerInput,
    contactless_payment: z.boolean().optional(),
    created_by: z.uuid().optional(),
    webhook_url: z.url().max(2048).optional(),
    user_metadata: z.union([text(0, 10_000), z.record(z.string(), z.unknown())]).optional(),
    card_limits: z
      .object({
        single_transaction: DecimalLimit.optional(),
        daily: DecimalLimit.optional(),
        weekly: DecimalLimit.optional(),
        monthly: DecimalLimit.optional(),
        yearly: DecimalLimit.optional(),
        all_time: DecimalLimit.optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/** The OpenAPI tag of every card route. */
export const CARD_TAG = 'Cards';

export const CardIdParams = z.object({ cardId: z.string() });
export const CustomerIdParams = z.object({ customerId: z.string() });

export const BalanceBody = z
  .object({ amount: MinorUnitNumber.min(1), type: z.enum(['fund', 'withdraw']), reference: trimmed(255) })
  .strict();
export const AliasBalanceBody = BalanceBody.omit({ type: true });

/** Checked by hand so that any other value is 400 invalid_status (rule 4), not validation_failed. */
export const StatusBody = z.object({ status: z.string() }).strict();

export const TerminateBody = z.object({ reason: text(0, 500).optional() }).strict();

const LimitCents = MinorUnitNumber.min(1).nullable().optional();
export const SpendLimitsBody = z
  .object({
    transaction: LimitCents,
    daily: LimitCents,
    weekly: LimitCents,
    monthly: LimitCents,
    yearly: LimitCents,
    all_time: LimitCents,
  })
  .strict();

export const ListCardsQuery = z.object({
  card_type: z.enum(CARD_TYPES).optional(),
  status: z.enum(CARD_STATUSES).optional(),
  search: trimmedText(1, 100).optional(),
  cursor: text(1, 512).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

export const ListTransactionsQuery = z.object({
  type: z.enum(CARD_TRANSACTION_TYPES).optional(),
  status: z.enum(CARD_TRANSACTION_STATUSES).optional(),
  cursor: text(1, 512).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

export const AuthorizationBody = z
  .object({
    amount: MinorUnitNumber.min(1),
    merchant_name: text(0, 200).optional(),
    /** When the merchant authorized; defaults to now (lets tests place purchases at window edges). */
    occurred_at: Timestamp.max(64)
      .regex(OCCURRED_AT_PATTERN, 'must be an RFC 3339 timestamp of the years 2000 to 2999')
      .optional()
      .openapi({ description: 'When the merchant authorized (years 2000 to 2999); default now' }),
  })
  .strict();

const SpendingLimitsObject = z.record(z.string(), z.string()).openapi('CardSpendingLimits', {
  description: 'Cents per window: single_transaction, daily, weekly, monthly, yearly, all_time; absent when unlimited',
});

const BillingAddressObject = z.object({
  line1: z.string(),
  line2: z.string().nullable(),
  city: z.string(),
  state: z.string(),
  postal_code: z.string(),
  country: z.string(),
});

export const CardObject = z
  .object({
    id: z.uuid(),
    company_id: z.uuid(),
    customer_id: z.uuid(),
    card_type: z.enum(CARD_TYPES),
    card_brand: z.string(),
    status: z.enum(CARD_STATUSES),
    created_status: z.string(),
    name: z.string(),
    preferred_name: z.string(),
    masked_pan: z.string(),
    last_four: z.string().nullable(),
    balance_amount: z.string(),
    balance_currency: z.string(),
    display_amount: z.number(),
    contactless_payment: z.boolean(),
    spending_limits: SpendingLimitsObject,
    reference: z.string(),
    webhook_url: z.string().nullable(),
    user_metadata: z.string(),
    billing_address: BillingAddressObject,
    created_by: z.string().nullable(),
    failure_reason: z.string().nullable(),
    workflow_id: z.string().openapi({ description: 'The provisioning workflow (card-provisioning-<id>)' }),
    termination_requested_at: Timestamp.nullable(),
    termination_workflow_id: z.string().nullable().openapi({ description: 'The termination workflow, once a termination was accepted' }),
    terminated_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('Card');

export const CardTransactionObject = z
  .object({
    id: z.uuid(),
    card_id: z.uuid(),
    type: z.enum(CARD_TRANSACTION_TYPES).openapi({
      description:
        "`reversal`, `capture_adjustment` and `refund`: a live card's money moved by the issuer after a purchase (a released hold, a capture differing from the authorization, a refund); `balance_before` and `balance_after` say which way",
    }),
    status: z.enum(CARD_TRANSACTION_STATUSES),
    amount: z.string(),
    balance_before: z.string(),
    balance_after: z.string(),
    fee_amount: z.string(),
    fee_type: z.literal('funding_fee').nullable(),
    currency: z.string(),
    reference: z.string().nullable(),
    merchant_name: z.string().nullable(),
    decline_reason: z.string().nullable(),
    workflow_id: z.string().nullable().openapi({ description: 'The workflow settling a funding or withdrawal; null for purchases and what followed them' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('CardTransaction');

export const CustomerObject = z
  .object({
    id: z.uuid(),
    company_id: z.uuid(),
    customer_type: z.string(),
    first_name: z.string(),
    last_name: z.string(),
    email: z.string(),
    phone_number: z.string(),
    dial_code: z.string(),
    date_of_birth: z.string(),
    id_type: z.string(),
    line1: z.string(),
    line2: z.string().nullable(),
    city: z.string(),
    state: z.string(),
    postal_code: z.string(),
    country: z.string(),
    created_at: Timestamp,
  })
  .openapi('CardCustomer');

export const CustomerCardEntry = z
  .object({
    id: z.uuid(),
    customer_id: z.uuid(),
    card_type: z.enum(CARD_TYPES),
    card_brand: z.string(),
    last_four: z.string().nullable(),
    currency: z.string(),
    status: z.enum(CARD_STATUSES),
    balance: z.string(),
    created_at: Timestamp,
  })
  .openapi('CustomerCardEntry');

const PageInfo = z.object({ next_cursor: z.string().nullable(), has_more: z.boolean(), limit: z.number() });

export const CreateCardResponse = resultEnvelopeSchema(
  z.object({ card: CardObject.extend({ webhook_signing_secret: z.string().nullable() }), customer: CustomerObject }),
);
export const CardResponse = resultEnvelopeSchema(z.object({ card: CardObject }));
export const CardListResponse = resultEnvelopeSchema(z.object({ cards: z.array(CardObject), page_info: PageInfo }));
export const TransactionListResponse = resultEnvelopeSchema(z.object({ transactions: z.array(CardTransactionObject), page_info: PageInfo }));
export const BalanceResponse = resultEnvelopeSchema(z.object({ success: z.boolean(), message: z.string(), transaction: CardTransactionObject }));
export const StatusResponse = resultEnvelopeSchema(
  z.object({
    success: z.boolean(),
    message: z.string(),
    card: CardObject.pick({ id: true, status: true, masked_pan: true, balance_amount: true, card_brand: true, name: true, reference: true, display_amount: true }),
  }),
);
const TerminationObject = z
  .object({
    card_id: z.uuid(),
    status: z.literal('terminated'),
    remaining_balance: z.string(),
    balance_returned: z.boolean(),
    terminated_at: Timestamp,
    reason: z.string().nullable(),
    workflow_id: z.string(),
  })
  .openapi('CardTermination');
/** 200: the termination; 202: the card, still terminating (its termination_workflow_id set). */
export const TerminationResponse = resultEnvelopeSchema(z.union([TerminationObject, z.object({ card: CardObject })]));
export const SecureResponse = resultEnvelopeSchema(
  z.object({ card_id: z.uuid(), pan: z.string(), cvv: z.string(), expiry: z.string(), expiry_month: z.string(), expiry_year: z.string() }),
);
export const AuthorizationResponse = resultEnvelopeSchema(
  z.object({ approved: z.boolean(), decline_reason: z.string().nullable(), transaction: CardTransactionObject }),
);
export const CustomerResponse = resultEnvelopeSchema(z.object({ customer: CustomerObject }));
export const CustomerCardsResponse = z.object({ status: z.string(), message: z.string(), cards: z.array(CustomerCardEntry), total: z.number() });
