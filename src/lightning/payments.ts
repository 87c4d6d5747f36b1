/**
 * Outgoing payments: a BOLT11 request decoded and previewed, the payment judged, recorded once per
 * reference and invoice with its reserve, and finalized with its provider's outcome.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { applyBalanceEntry } from '../balances/service';
import { assetById } from '../catalogue/service';
import type { Config } from '../config';
import { updateReturning } from '../db/lean';
import { emit } from '../events/service';
import { judgeMovement } from '../movements/gate';
import type { Caller } from '../policies/service';
import { DomainError, errors } from '../shared/errors';
import { uuid } from '../shared/ids';
import { recordStart } from '../temporal/starter';
import { isExpired, msatToSat, satsToDebit } from './amounts';
import { Bolt11Error, decodeBolt11, type DecodedInvoice } from './bolt11';
import { claimPaymentHash, previewsClaimNothing, releasePaymentHashClaim } from './claims';
import { lightningNodeUnavailable } from './lnd';
import { LndProvider } from './lnd-provider';
import { LightningInvoice, type InvoiceStatus } from './entities';
import { lightningPaymentFlow } from './flows/payment';
import { MAX_PAYMENT_SATS } from './schemas';
import { presentPayment } from './presenters';
import { NO_LIGHTNING_NODES, providerFor, remoteProvidersOf, type LightningNodes, type PaymentOrder, type PaymentOutcome } from './provider';
import { byReference, insertRowUnlessTaken, referenceReused, tenantFilter, type NewRecordRow, type Tenant } from './service';

export function decodePaymentRequest(request: string): DecodedInvoice {
  try {
    return decodeBolt11(request);
  } catch (error) {
    if (!(error instanceof Bolt11Error)) throw error;
    throw new DomainError({ kind: 'invalid', code: 'invalid_payment_request', message: `Invalid BOLT11 payment request: ${error.message}.`, param: 'request' });
  }
}

/**
 * Inserts an outgoing payment once per reference and once per invoice: the partial unique index
 * allows one pending or paid payment per (organization, environment, payment hash), so a concurrent payment
 * of the same invoice under another reference waits for the first to commit and is refused (409)
 * before it reserves anything. Nothing inserted: the reference names the original (a repeat), or
 * another payment of the invoice is active (the refusal). Neither any more (that payment failed in
 * between): the insert is tried again.
 */
async function insertPaymentOnce(em: EntityManager, row: NewRecordRow): Promise<{ invoice: LightningInvoice; created: boolean }> {
  const tenant = { organizationId: row.organizationId, environment: row.environment };
  // Each pass that inserts nothing found a repeat or a refusal, unless the conflicting payment ended in between.
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const inserted = await insertRowUnlessTaken(em, row);
    if (inserted) return { invoice: em.map(LightningInvoice, inserted), created: true };
    const original = await byReference(em, tenant, 'outgoing', row.reference);
    if (original) return { invoice: original, created: false };
    const paying = await em.findOne(LightningInvoice, {
      ...tenantFilter(tenant),
      direction: 'outgoing',
      paymentHash: row.paymentHash,
      status: { $in: ['pending', 'paid'] },
    });
    if (paying) throw errors.conflict('invoice_already_paid', `This invoice is already being paid or was paid by payment ${paying.id}.`, { payment_id: paying.id });
  }
  throw new Error(`payment ${row.id}: its insert kept meeting a unique key that neither a repeat nor an active payment holds`);
}

/** Amount to pay: the invoice's, else the payer's for an any-amount invoice; at most MAX_PAYMENT_SATS. */
function amountToPay(invoice: DecodedInvoice, amountSat: number | undefined): bigint {
  if (invoice.amountMsat !== null) {
    if (amountSat !== undefined && BigInt(amountSat) * 1000n !== invoice.amountMsat) throw errors.validation('amount must be omitted or equal the invoice amount', 'amount');
    if (invoice.amountMsat > BigInt(MAX_PAYMENT_SATS) * 1000n) {
      throw errors.invalid('amount_too_large', `The invoice asks for more than ${MAX_PAYMENT_SATS} sats, the most one payment may send.`, {
        param: 'request',
        details: { max_amount: MAX_PAYMENT_SATS },
      });
    }
    return invoice.amountMsat;
  }
  if (amountSat === undefined) throw errors.validation('This invoice has no amount: give one in `amount` (sats).', 'amount');
  return BigInt(amountSat) * 1000n;
}

/** Previews only estimate: nothing there settles, so the internal route never calls this. */
const noSettlement = async (): Promise<PaymentOutcome> => ({ state: 'unknown' });

/** A payment's preview: asks the route's node for its fee (a node call, outside any transaction); live without a node is 503. */
export async function previewPayment(em: EntityManager, tenant: Tenant, request: string, amountSat?: number, nodes: LightningNodes = NO_LIGHTNING_NODES) {
  if (tenant.environment === 'live' && !nodes.lnd('live')) throw lightningNodeUnavailable();
  const invoice = decodePaymentRequest(request);
  const amountMsat = amountToPay(invoice, amountSat);
  const provider = invoice.network !== nodes.network(tenant.environment) ? null : await providerFor(em, tenant.environment, invoice, noSettlement, remoteProvidersOf(nodes, previewsClaimNothing), nodes);
  const estimate = provider ? await provider.estimate(invoice, amountMsat, request) : { routeFound: false, feeMsat: 0n };
  // A payment through LND claims the hash on that node, every organization's (claims.ts).
  const claimNode = provider instanceof LndProvider ? await provider.node.identityPubkey() : null;
  const feeSat = satsToDebit(estimate.feeMsat);
  return {
    object: 'lightning_payment_preview' as const,
    payment_hash: invoice.paymentHash,
    destination: invoice.payee,
    amount_sat: msatToSat(amountMsat).toString(),
    fee_sat: feeSat.toString(),
    total_sat: (satsToDebit(amountMsat) + feeSat).toString(),
    description: invoice.description ?? '',
    expires_at: invoice.expiresAt,
    is_expired: isExpired(invoice),
    route_found: estimate.routeFound && !isExpired(invoice),
    estimate: { invoice, amountMsat, feeMsat: estimate.feeMsat, routeFound: estimate.routeFound, claimNode },
  };
}

export type PaymentPreview = Awaited<ReturnType<typeof previewPayment>>;

export interface NewPayment {
  request: string;
  reference: string;
  customerId?: string;
  maxFeeSat?: number;
  amountSat?: number;
}

/**
 * The fee limit of an LND payment given no max_fee: the estimate is a route's fee at one moment, so the
 * limit leaves room for another route (or parts of one payment): the larger of LIGHTNING_LND_FEE_LIMIT_FLOOR_SATS
 * and LIGHTNING_LND_FEE_LIMIT_PPM of the amount, and never below the estimate.
 */
export function lndDefaultFeeLimitMsat(config: Config, amountMsat: bigint, estimateMsat: bigint): bigint {
  const proportional = (amountMsat * BigInt(config.LIGHTNING_LND_FEE_LIMIT_PPM)) / 1_000_000n;
  const floor = BigInt(config.LIGHTNING_LND_FEE_LIMIT_FLOOR_SATS) * 1000n;
  return [estimateMsat, floor, proportional].reduce((a, b) => (a > b ? a : b));
}

/** 9999-12-31T23:59:59Z in Unix seconds. */
const MAX_EXPIRES_AT = 253_402_300_799;

/** The same invoice, however its case or surrounding blanks were written (bech32 is case-insensitive). */
const sameRequest = (a: string, b: string) => a.trim().toLowerCase() === b.trim().toLowerCase();

/**
 * The original payment of a repeated reference, or 409 when the repeat asks for another payment:
 * another request, amount, max_fee (0 and omitted both mean none) or customer. An omitted amount
 * repeats the invoice's own; for an any-amount invoice it differs from the amount first given.
 */
function samePayment(existing: LightningInvoice, input: NewPayment): LightningInvoice {
  if (!sameRequest(existing.request, input.request)) throw referenceReused(existing, 'request');
  const amountMsat = input.amountSat !== undefined ? BigInt(input.amountSat) * 1000n : decodeBolt11(existing.request, { verifiedPayee: existing.destination }).amountMsat;
  if (amountMsat !== BigInt(existing.amountMsat)) throw referenceReused(existing, 'amount');
  const maxFeeMsat = input.maxFeeSat ? BigInt(input.maxFeeSat) * 1000n : null;
  if ((existing.maxFeeMsat ? BigInt(existing.maxFeeMsat) : null) !== maxFeeMsat) throw referenceReused(existing, 'max_fee');
  if ((existing.customerId ?? null) !== (input.customerId ?? null)) throw referenceReused(existing, 'customer_id');
  return existing;
}

/**
 * The preview a payment is decided on, or null when its reference already names one (createPayment
 * answers that): the route's prepare step reads it before the transaction opens.
 */
export async function preparePayment(em: EntityManager, tenant: Tenant, input: NewPayment, nodes: LightningNodes): Promise<PaymentPreview | null> {
  if (await byReference(em, tenant, 'outgoing', input.reference)) return null;
  return previewPayment(em, tenant, input.request, input.amountSat, nodes);
}

/**
 * Pays a BOLT11 invoice once per reference: checks expiry, route and max_fee before anything is
 * sent (rule 5), has the movement gate judge it (`lightning_payment`: amount and fee limit in sats,
 * the payee node; a refusal moves nothing), records the payment (one active payment per invoice),
 * reserves amount plus the fee limit and records its workflow's start, fired once the caller's
 * transaction commits. A repeated reference returns the original, judged when it was made.
 * `prepared` is preparePayment's answer when the caller read it outside its transaction.
 */
export async function createPayment(em: EntityManager, config: Config, tenant: Caller, input: NewPayment, nodes: LightningNodes = NO_LIGHTNING_NODES, prepared?: PaymentPreview | null) {
  const existing = await byReference(em, tenant, 'outgoing', input.reference);
  if (existing) return samePayment(existing, input);
  const preview = prepared ?? (await previewPayment(em, tenant, input.request, input.amountSat, nodes));
  const { invoice, amountMsat, feeMsat } = preview.estimate;
  if (invoice.network !== nodes.network(tenant.environment)) {
    throw new DomainError({ kind: 'invalid', code: 'invalid_payment_request', message: `This ${tenant.environment} key pays ${nodes.network(tenant.environment)} invoices only; the request is for ${invoice.network}.`, param: 'request' });
  }
  // A remote invoice may say it expires after any date PostgreSQL (or a Date) can hold.
  if (invoice.expiresAt > MAX_EXPIRES_AT) throw errors.validation('The invoice expires too far in the future (after the year 9999) to be paid.', 'request');
  if (preview.is_expired) throw new DomainError({ kind: 'invalid', code: 'invoice_expired', message: 'The invoice has expired and can no longer be paid.', param: 'request' });
  if (!preview.estimate.routeFound) throw new DomainError({ kind: 'invalid', code: 'route_not_found', message: 'No route to the destination was found; nothing was sent.', param: 'request' });
  const maxFeeMsat = input.maxFeeSat ? BigInt(input.maxFeeSat) * 1000n : null;
  if (maxFeeMsat !== null && feeMsat > maxFeeMsat) {
    throw new DomainError({
      kind: 'invalid',
      code: 'max_fee_exceeded',
      message: `The estimated fee of ${preview.fee_sat} sat exceeds max_fee (${input.maxFeeSat} sat); nothing was sent.`,
      param: 'max_fee',
      details: { estimated_fee_sat: preview.fee_sat, max_fee: input.maxFeeSat },
    });
  }
  const feeLimitMsat = maxFeeMsat ?? (preview.estimate.claimNode ? lndDefaultFeeLimitMsat(config, amountMsat, feeMsat) : feeMsat);
  await judgeMovement(em, config, tenant, {
    operationType: 'lightning_payment',
    txType: 'balance_transfer',
    source: { type: 'lightning_balance', environment: tenant.environment },
    value: { asset: assetById('BTC'), amount: satsToDebit(amountMsat) },
    feeRaw: satsToDebit(feeLimitMsat),
    destination: { address: invoice.payee, type: 'lightning_node' },
  });
  const row: NewRecordRow = {
    id: uuid(),
    organizationId: tenant.organizationId,
    environment: tenant.environment,
    direction: 'outgoing',
    reference: input.reference,
    customerId: input.customerId ?? null,
    paymentHash: invoice.paymentHash,
    request: input.request.trim(),
    destination: invoice.payee,
    preimage: '',
    amountMsat: amountMsat.toString(),
    maxFeeMsat: maxFeeMsat?.toString() ?? null,
    feeLimitMsat: feeLimitMsat.toString(),
    // A remote description may hold NUL, which PostgreSQL text cannot store; the request keeps the original.
    description: (invoice.description ?? '').replaceAll('\0', '\uFFFD'),
    expiresAt: new Date(invoice.expiresAt * 1000),
    createdAt: new Date(),
  };
  const { invoice: payment, created } = await insertPaymentOnce(em, row);
  if (!created) return samePayment(payment, input);
  // Refused, this transaction rolls back: the payment is not recorded and nothing is reserved.
  if (preview.estimate.claimNode && !(await claimPaymentHash(em, preview.estimate.claimNode, invoice.paymentHash, payment.id))) {
    throw errors.conflict('invoice_already_paid', 'This invoice is already being paid or was paid through this Lightning node; nothing was reserved or sent.');
  }
  await applyBalanceEntry(em, {
    organizationId: tenant.organizationId,
    environment: tenant.environment,
    currency: 'sat',
    kind: 'reserve',
    amount: satsToDebit(amountMsat) + satsToDebit(feeLimitMsat),
    reference: { type: 'lightning_payment', id: payment.id },
  });
  recordStart(em, lightningPaymentFlow, { paymentId: payment.id }, tenant.organizationId);
  return payment;
}

export function paymentOrder(payment: LightningInvoice): PaymentOrder {
  return {
    paymentId: payment.id,
    organizationId: payment.organization.id,
    environment: payment.environment,
    // The request was decoded and its signature checked when the payment was accepted.
    invoice: decodeBolt11(payment.request, { verifiedPayee: payment.destination }),
    request: payment.request,
    amountMsat: BigInt(payment.amountMsat),
    feeLimitMsat: BigInt(payment.feeLimitMsat ?? '0'),
  };
}

/**
 * Ends a pending payment with its provider's final outcome, once: paid captures amount plus the
 * actual fee and releases the rest of the reserve; failed releases the whole reserve.
 */
export async function finalizePayment(em: EntityManager, paymentId: string, outcome: Exclude<PaymentOutcome, { state: 'unknown' }>): Promise<InvoiceStatus> {
  const now = new Date();
  const changes =
    outcome.state === 'succeeded'
      ? { status: 'paid' as const, preimage: outcome.preimage, feeMsat: outcome.feeMsat.toString(), updatedAt: now }
      : { status: 'failed' as const, failureReason: outcome.reason, updatedAt: now };
  const [payment] = await updateReturning(em, LightningInvoice, { id: paymentId, direction: 'outgoing', status: 'pending' }, changes);
  // Ended before: its status as it is.
  if (!payment) return (await em.findOneOrFail(LightningInvoice, { id: paymentId, direction: 'outgoing' }, { refresh: true })).status;
  if (outcome.state === 'failed') await releasePaymentHashClaim(em, payment.id);
  const organizationId = payment.organization.id;
  const reference = { type: 'lightning_payment', id: payment.id };
  const reserved = satsToDebit(BigInt(payment.amountMsat)) + satsToDebit(BigInt(payment.feeLimitMsat ?? '0'));
  const spent = outcome.state === 'succeeded' ? satsToDebit(BigInt(payment.amountMsat)) + satsToDebit(outcome.feeMsat) : 0n;
  if (spent > 0n) await applyBalanceEntry(em, { organizationId, environment: payment.environment, currency: 'sat', kind: 'capture', amount: spent, reference });
  if (reserved - spent > 0n) await applyBalanceEntry(em, { organizationId, environment: payment.environment, currency: 'sat', kind: 'release', amount: reserved - spent, reference });
  await emit(em, {
    organizationId, environment: payment.environment,
    type: outcome.state === 'succeeded' ? 'lightning.payment.succeeded' : 'lightning.payment.failed',
    data: presentPayment(payment),
    dedupeKey: `lightning.payment.${payment.status}:${payment.id}`,
  });
  return payment.status;
}
