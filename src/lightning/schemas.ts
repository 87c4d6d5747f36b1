import { BECH32_CHARSET } from '../chains/schemas';
import { resultEnvelopeSchema, text, Timestamp, z } from '../shared/schemas';
import { HELD_REASONS, INVOICE_DIRECTIONS, INVOICE_STATUSES } from './entities';

/** The largest invoice this service issues, and the most one payment may send (0.2 BTC). */
export const MAX_INVOICE_SATS = 20_000_000;
export const MAX_PAYMENT_SATS = MAX_INVOICE_SATS;
/** The largest max_fee a payment may give: no fee can sensibly exceed the largest amount. */
export const MAX_FEE_SATS = MAX_PAYMENT_SATS;
export const DEFAULT_INVOICE_EXPIRY_SECONDS = 86_400;

const Reference = text(1, 255);

/** A held payment's two fields (docs/lightning.md, "Held payments"), on the payment and on its record in the invoice list. */
const HeldFields = {
  held_at: Timestamp.nullable().openapi({
    description:
      'Set while the payment is held: its node could not be asked what became of it (LIGHTNING_LND_SEND_ATTEMPTS attempts failed for a transient reason). It stays pending, its reserve stays locked, and it is re-queried until the node answers, never failed blind. null otherwise, and once it ends',
  }),
  held_reason: z.enum(HELD_REASONS).nullable().openapi({
    description:
      'Why it is held: the node did not answer (unreachable), runs on another network (network_mismatch), has a macaroon live refuses (macaroon_too_broad), answered an error not known to be final (node_error), or the service failed (internal_error). null when not held',
  }),
};
/**
 * The shape of a BOLT11 request, for the document only (the decoder checks it, and what no pattern
 * can: the checksum, the fields, the signature; a string outside it is 400 invalid_payment_request):
 * `ln`, the network (bc, tb, tbs, bcrt), an optional amount without leading zeros, the separator `1`,
 * then at least 230 bech32 characters (timestamp, the mandatory p, s and d fields, signature, checksum).
 * All lower or all upper case, as bech32 allows. The decoder also trims surrounding whitespace: the
 * document shows the request itself.
 */
export const BOLT11_PATTERN = `^(ln(bc|tb|tbs|bcrt)([1-9][0-9]*[munp]?)?1[${BECH32_CHARSET}]{230,}|LN(BC|TB|TBS|BCRT)([1-9][0-9]*[MUNP]?)?1[${BECH32_CHARSET.toUpperCase()}]{230,})$`;
/** A sandbox (testnet) invoice of 2,100 sats, "coffee", valid until May 2027, payable to no node: the document's example decodes. */
const EXAMPLE_REQUEST =
  'lntb21u1p4qjckqpp5qyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqssp5qgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqdq2vdhkven9v5xq97zvuqcqzpgnp4q2vfczmkedtrju0aexl0x8kqds6kpueyn4hwnewc83tky4vkup0k79qrsgqkh6ch6le4zn03wjn60yurdckpxl93e62gznzjrjyxzpky680t643vlwll7htexateqkfnpcj985mdj5ypea5nxwde2y3wc0d6geml7gp6gpu5w';
const PaymentRequest = text(1, 7089).openapi({ description: 'A BOLT11 payment request', pattern: BOLT11_PATTERN, example: EXAMPLE_REQUEST });

export const CreateInvoiceBody = z
  .object({
    customer_id: z.uuid().optional(),
    amount: z.number().int().min(1).max(MAX_INVOICE_SATS).openapi({ description: 'sats' }),
    description: text(1, 639),
    expiry: z.number().int().min(60).max(31_536_000).default(DEFAULT_INVOICE_EXPIRY_SECONDS).openapi({ description: 'seconds' }),
    reference: Reference,
  })
  .strict();

export const CreatedInvoice = z
  .object({
    object: z.literal('lightning_invoice'),
    id: z.uuid(),
    payment_hash: z.string(),
    request: z.string(),
    amount_sat: z.string(),
    description: z.string(),
    status: z.enum(INVOICE_STATUSES),
    expires_at: Timestamp,
    created_at: Timestamp,
    workflow_id: z.string().nullable().openapi({ description: 'The Temporal workflow carrying this record: lightning-payment-<id> for a payment; null for an incoming invoice (the lightning-invoice-expiry Schedule expires it)' }),
  })
  .openapi('LightningCreatedInvoice');

export const LightningInvoiceObject = z
  .object({
    object: z.literal('lightning_invoice'),
    id: z.uuid(),
    payment_hash: z.string(),
    request: z.string(),
    preimage: z.string().openapi({ description: 'empty string until paid' }),
    amount_sat: z.string(),
    amount_msat: z.string(),
    fee_sat: z.string(),
    fee_msat: z.string(),
    description: z.string(),
    status: z.enum(INVOICE_STATUSES),
    direction: z.enum(INVOICE_DIRECTIONS),
    company_id: z.string(),
    customer_id: z.string().nullable(),
    reference: z.string(),
    expires_at: z.string().openapi({ description: 'Unix epoch seconds, as a string' }),
    created_at: Timestamp,
    updated_at: z.string().openapi({ description: 'RFC 3339, or an empty string if never updated' }),
    ...HeldFields,
    workflow_id: z.string().nullable().openapi({ description: 'The Temporal workflow carrying this record: lightning-payment-<id> for a payment; null for an incoming invoice (the lightning-invoice-expiry Schedule expires it)' }),
  })
  .openapi('LightningInvoice');

export const InvoiceEnvelope = resultEnvelopeSchema(LightningInvoiceObject);

export const ListInvoicesQuery = z
  .object({
    // Bounded so that the offset it makes stays an integer PostgreSQL reads (1e300 would not).
    page: z.coerce.number().int().min(1).max(1_000_000_000).default(1),
    page_size: z.coerce.number().int().min(1).max(100).default(20),
    status: z.enum(INVOICE_STATUSES).optional(),
    direction: z.enum(INVOICE_DIRECTIONS).optional(),
  })
  .strict();

export const InvoiceListEnvelope = resultEnvelopeSchema(
  z.object({ invoices: z.array(LightningInvoiceObject), total_count: z.string(), page: z.number().int(), page_size: z.number().int() }),
);

export const InvoiceIdParams = z.object({ id: z.string() });

export const DecodeBody = z.object({ request: PaymentRequest }).strict();
export const DecodedRequest = z
  .object({
    object: z.literal('lightning_payment_request'),
    network: z.string(),
    payment_hash: z.string(),
    destination: z.string(),
    amount_sat: z.number().int().openapi({ description: '0 for an any-amount invoice' }),
    amount_msat: z.number().int(),
    description: z.string(),
    description_hash: z.string().nullable(),
    expires_at: z.number().int().openapi({ description: 'Unix seconds' }),
    is_expired: z.boolean(),
  })
  .openapi('LightningDecodedRequest');

const PaymentAmount = z.number().int().min(1).max(MAX_PAYMENT_SATS);

export const PreviewBody = z.object({ request: PaymentRequest, amount: PaymentAmount.optional().openapi({ description: `sats, at most ${MAX_PAYMENT_SATS}; only for an invoice without an amount` }) }).strict();
export const PaymentPreview = z
  .object({
    object: z.literal('lightning_payment_preview'),
    payment_hash: z.string(),
    destination: z.string(),
    amount_sat: z.string(),
    fee_sat: z.string(),
    total_sat: z.string(),
    description: z.string(),
    expires_at: z.number().int(),
    is_expired: z.boolean(),
    route_found: z.boolean(),
  })
  .openapi('LightningPaymentPreview');

export const PayBody = z
  .object({
    request: PaymentRequest,
    reference: Reference,
    customer_id: z.uuid().optional(),
    max_fee: z.number().int().min(0).max(MAX_FEE_SATS).optional().openapi({ description: `sats, at most ${MAX_FEE_SATS}; omitted or 0: no cap` }),
    amount: PaymentAmount.optional().openapi({ description: `sats, at most ${MAX_PAYMENT_SATS}; only for an invoice without an amount` }),
  })
  .strict();

export const LightningPaymentObject = z
  .object({
    object: z.literal('lightning_payment'),
    id: z.uuid(),
    transaction_id: z.uuid(),
    payment_hash: z.string(),
    preimage: z.string(),
    destination: z.string(),
    amount_sat: z.string(),
    fee_sat: z.string(),
    status: z.enum(['pending', 'paid', 'failed']),
    failure_reason: z.string().nullable(),
    ...HeldFields,
    reference: z.string(),
    created_at: Timestamp,
    workflow_id: z.string().openapi({ description: 'The Temporal workflow carrying this payment (lightning-payment-<id>)' }),
  })
  .openapi('LightningPayment');
export const PaymentEnvelope = resultEnvelopeSchema(LightningPaymentObject);

export const SandboxInvoiceBody = z
  .object({
    node: z.enum(['ok', 'slow', 'fail', 'unknown', 'unknown_then_fail', 'unroutable']).default('ok'),
    amount: z.number().int().min(1).max(MAX_INVOICE_SATS).optional(),
    description: text(1, 639).default('sandbox remote invoice'),
    expiry: z.number().int().min(1).max(31_536_000).default(3600),
  })
  .strict();
export const SandboxInvoice = z.object({ object: z.literal('sandbox_lightning_invoice'), node: z.string(), destination: z.string(), payment_hash: z.string(), request: z.string() });
