import { iso, unixSeconds } from '../shared/time';
import { isExpired, msatToSat, satsToDebit } from './amounts';
import type { DecodedInvoice } from './bolt11';
import type { LightningInvoice } from './entities';
import { paymentWorkflowId } from './flows/payment';

/**
 * The workflow carrying a record (support goes from the resource to its history): a payment's. An
 * incoming invoice has none; the `lightning-invoice-expiry` Schedule's sweep expires it.
 */
const workflowIdOf = (record: LightningInvoice) => (record.direction === 'incoming' ? null : paymentWorkflowId(record.id));

/**
 * An incoming invoice past its expiry is expired, whether or not the sweep has recorded it yet
 * (payment is refused from expires_at on): reads never show it pending, and show what the sweep
 * will write (`updated_at` = expires_at).
 */
const isOverdue = (invoice: LightningInvoice, now = new Date()) => invoice.direction === 'incoming' && invoice.status === 'pending' && invoice.expiresAt <= now;
const presentedStatus = (invoice: LightningInvoice) => (isOverdue(invoice) ? ('expired' as const) : invoice.status);
const presentedUpdatedAt = (invoice: LightningInvoice) => (isOverdue(invoice) ? invoice.expiresAt : invoice.updatedAt);

/**
 * A pending payment's hold (docs/lightning.md, "Held payments"): since when its node could not say what
 * became of it, and the kind of failure (never the node's own words: they name its address). An ended
 * payment, and an invoice, show none.
 */
const holdOf = (record: LightningInvoice) =>
  record.status === 'pending' && record.heldAt ? { held_at: iso(record.heldAt), held_reason: record.heldReasonCode ?? ('node_error' as const) } : { held_at: null, held_reason: null };

export function presentCreatedInvoice(invoice: LightningInvoice) {
  return {
    object: 'lightning_invoice' as const,
    id: invoice.id,
    payment_hash: invoice.paymentHash,
    request: invoice.request,
    amount_sat: msatToSat(BigInt(invoice.amountMsat)).toString(),
    description: invoice.description,
    status: presentedStatus(invoice),
    expires_at: iso(invoice.expiresAt),
    created_at: iso(invoice.createdAt),
    workflow_id: workflowIdOf(invoice),
  };
}

/** The specification's invoice resource: expires_at in Unix seconds (a string), preimage only once paid. */
export function presentInvoice(invoice: LightningInvoice) {
  const updatedAt = presentedUpdatedAt(invoice);
  return {
    object: 'lightning_invoice' as const,
    id: invoice.id,
    payment_hash: invoice.paymentHash,
    request: invoice.request,
    preimage: invoice.status === 'paid' ? invoice.preimage : '',
    amount_sat: msatToSat(BigInt(invoice.amountMsat)).toString(),
    amount_msat: invoice.amountMsat,
    fee_sat: msatToSat(BigInt(invoice.feeMsat)).toString(),
    fee_msat: invoice.feeMsat,
    description: invoice.description,
    status: presentedStatus(invoice),
    direction: invoice.direction,
    company_id: invoice.organization.id,
    customer_id: invoice.customerId ?? null,
    reference: invoice.reference,
    expires_at: String(unixSeconds(invoice.expiresAt)),
    created_at: iso(invoice.createdAt),
    updated_at: updatedAt ? iso(updatedAt) : '',
    ...holdOf(invoice),
    workflow_id: workflowIdOf(invoice),
  };
}

export function presentPayment(payment: LightningInvoice) {
  return {
    object: 'lightning_payment' as const,
    id: payment.id,
    transaction_id: payment.id,
    payment_hash: payment.paymentHash,
    preimage: payment.status === 'paid' ? payment.preimage : '',
    destination: payment.destination,
    amount_sat: msatToSat(BigInt(payment.amountMsat)).toString(),
    fee_sat: satsToDebit(BigInt(payment.feeMsat)).toString(),
    status: payment.status === 'expired' ? ('failed' as const) : payment.status,
    failure_reason: payment.failureReason ?? null,
    ...holdOf(payment),
    reference: payment.reference,
    created_at: iso(payment.createdAt),
    workflow_id: paymentWorkflowId(payment.id),
  };
}

export function presentDecoded(invoice: DecodedInvoice) {
  const amountMsat = invoice.amountMsat ?? 0n;
  return {
    object: 'lightning_payment_request' as const,
    network: invoice.network,
    payment_hash: invoice.paymentHash,
    destination: invoice.payee,
    amount_sat: Number(msatToSat(amountMsat)),
    amount_msat: Number(amountMsat),
    description: invoice.description ?? '',
    description_hash: invoice.descriptionHash,
    expires_at: invoice.expiresAt,
    is_expired: isExpired(invoice),
  };
}
