/**
 * Incoming invoices: issued (by LND, or signed with the sandbox node key) and recorded once per
 * reference, settled when paid, and expired by their timer or the expiry sweep.
 */
import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha2';
import type { Environment } from '../api-keys/entities';
import { applyBalanceEntry } from '../balances/service';
import { detachedRow, findOneByColumns, readOneByColumns, updateReturning } from '../db/lean';
import { emit } from '../events/service';
import type { KeyService } from '../keys/service';
import { uuid } from '../shared/ids';
import { unixSeconds } from '../shared/time';
import { msatToSat } from './amounts';
import { decodeBolt11, encodeBolt11, networkForEnvironment } from './bolt11';
import { lightningNodeUnavailable } from './lnd';
import { LightningInvoice, type InvoiceStatus } from './entities';
import { withNodeKey } from './node-key';
import { presentInvoice } from './presenters';
import { NO_LIGHTNING_NODES, type LightningNodes, type PaymentOutcome } from './provider';
import { byReference, insertRowUnlessTaken, referenceReused, tenantFilter, type Tenant } from './service';

const MIN_FINAL_CLTV = 40;

export interface NewInvoice {
  amountSat: number;
  description: string;
  expirySeconds: number;
  reference: string;
  customerId?: string;
  /** Defaults to now; a test on a time-skipping server passes that server's clock. */
  issuedAt?: Date;
}

/** The original invoice of a repeated reference, or 409 when the repeat asks for another invoice (amount, description, expiry, customer). */
function sameInvoice(existing: LightningInvoice, input: NewInvoice): LightningInvoice {
  if (BigInt(existing.amountMsat) !== BigInt(input.amountSat) * 1000n) throw referenceReused(existing, 'amount');
  if (existing.description !== input.description) throw referenceReused(existing, 'description');
  // expires_at is the invoice's whole-second timestamp plus its expiry.
  if (unixSeconds(existing.expiresAt) - unixSeconds(existing.createdAt) !== input.expirySeconds) throw referenceReused(existing, 'expiry');
  if ((existing.customerId ?? null) !== (input.customerId ?? null)) throw referenceReused(existing, 'customer_id');
  return existing;
}

/** A BOLT11 invoice as its node issued it, not yet recorded. */
export interface IssuedInvoice {
  request: string;
  destination: string;
  paymentHash: string;
  preimage: string;
  /** The invoice's own timestamp and expiry (whole seconds). */
  createdAt: Date;
  expiresAt: Date;
}

/**
 * Issues the invoice `input` asks for: by the environment's LND when it has one (with our preimage, so
 * the internal route can settle it too), else signed with the sandbox node key; live without a node is
 * 503. Null when the reference already names an invoice and LND was to issue it: an invoice on the node
 * cannot be withdrawn, so a repeat is answered before the node is asked (a signature, which is ours
 * alone, is made and the repeat answered by the insert). A node call: made outside any transaction.
 */
async function issueInvoice(em: EntityManager, keys: KeyService, tenant: Tenant, input: NewInvoice, nodes: LightningNodes): Promise<IssuedInvoice | null> {
  const lnd = nodes.lnd(tenant.environment);
  if (lnd) {
    if (await byReference(em, tenant, 'incoming', input.reference)) return null;
    const preimage = randomBytes(32);
    const added = await lnd.addInvoice({ preimage: preimage.toString('hex'), amountMsat: BigInt(input.amountSat) * 1000n, description: input.description, expirySeconds: input.expirySeconds });
    const decoded = decodeBolt11(added.request);
    return { request: added.request, destination: decoded.payee, paymentHash: added.paymentHash, preimage: preimage.toString('hex'), createdAt: new Date(decoded.timestamp * 1000), expiresAt: new Date(decoded.expiresAt * 1000) };
  }
  if (tenant.environment === 'live') throw lightningNodeUnavailable();
  return signWithNodeKey(em, keys, tenant.environment, input);
}

/** An invoice signed with the environment's node key (sandbox without LND; tests make live records so). */
export async function signWithNodeKey(em: EntityManager, keys: KeyService, environment: Environment, input: NewInvoice): Promise<IssuedInvoice> {
  const preimage = randomBytes(32);
  const paymentHash = sha256(preimage);
  const createdAt = input.issuedAt ?? new Date();
  // BOLT11 timestamps are whole seconds; expires_at is what the invoice itself says.
  const timestamp = unixSeconds(createdAt);
  const { request, destination } = await withNodeKey(em, keys, environment, (privateKey, publicKey) => ({
    destination: publicKey,
    request: encodeBolt11(
      {
        network: networkForEnvironment(environment),
        amountMsat: BigInt(input.amountSat) * 1000n,
        timestamp,
        paymentHash,
        paymentSecret: randomBytes(32),
        description: input.description,
        expirySeconds: input.expirySeconds,
        minFinalCltvExpiry: MIN_FINAL_CLTV,
      },
      privateKey,
      // The row's public key was derived from this private key when the key was made.
      Buffer.from(publicKey, 'hex'),
    ),
  }));
  return { request, destination, paymentHash: Buffer.from(paymentHash).toString('hex'), preimage: preimage.toString('hex'), createdAt, expiresAt: new Date((timestamp + input.expirySeconds) * 1000) };
}

/**
 * Issues (unless `issued` is given) and records an invoice; the same reference with the same parameters
 * returns the original, with others it is 409. One statement writes it, so it needs no transaction of
 * its own (the route runs it outside one). No workflow: the `lightning-invoice-expiry` Schedule's sweep
 * expires it (expireDueInvoices); one issued by LND is settled from its invoice subscription
 * (invoice-watch.ts). The invoice is a detached copy (src/db/lean.ts).
 */
export async function createInvoice(em: EntityManager, keys: KeyService, tenant: Tenant, input: NewInvoice, nodes: LightningNodes = NO_LIGHTNING_NODES, issued?: IssuedInvoice) {
  const invoiceIssued = issued ?? (await issueInvoice(em, keys, tenant, input, nodes));
  const inserted = invoiceIssued && (await insertInvoiceUnlessTaken(em, tenant, input, invoiceIssued));
  if (inserted) return inserted;
  // The reference names an invoice already (recorded before, or by a concurrent repeat that committed first).
  const original = await readOneByColumns(em, LightningInvoice, { ...tenantFilter(tenant), direction: 'incoming', reference: input.reference });
  if (!original) throw new Error(`invoice reference ${input.reference}: the insert met a unique key that no invoice of that reference holds`);
  return sameInvoice(original, input);
}

/** The insert of an incoming invoice, unless its reference is taken (then null), as a detached copy. */
async function insertInvoiceUnlessTaken(em: EntityManager, tenant: Tenant, input: NewInvoice, issued: IssuedInvoice): Promise<LightningInvoice | null> {
  const row = await insertRowUnlessTaken(em, {
    id: uuid(),
    organizationId: tenant.organizationId,
    environment: tenant.environment,
    direction: 'incoming',
    reference: input.reference,
    customerId: input.customerId ?? null,
    paymentHash: issued.paymentHash,
    request: issued.request,
    destination: issued.destination,
    preimage: issued.preimage,
    amountMsat: (BigInt(input.amountSat) * 1000n).toString(),
    maxFeeMsat: null,
    feeLimitMsat: null,
    description: input.description,
    expiresAt: issued.expiresAt,
    createdAt: issued.createdAt,
  });
  return row ? detachedRow(em, LightningInvoice, row) : null;
}

/**
 * Marks one of our pending, unexpired incoming invoices paid for a payer (a remote one, or an
 * organization's payment over the internal route), credits the Lightning balance and emits
 * lightning.invoice.paid, all in the caller's transaction. Idempotent per paying payment.
 * `settledByNode`: our LND already took the payment (final on the network), so it is recorded even
 * when the expiry sweep got to the invoice first.
 */
export async function settleIncomingInvoice(
  em: EntityManager,
  input: { paymentHash: string; environment: Environment; amountMsat: bigint; paidByPaymentId: string | null; invoiceId?: string; settledByNode?: boolean },
): Promise<{ outcome: PaymentOutcome; invoiceId?: string }> {
  // Only within the payer's environment: a sandbox payment never finds (or credits) a live invoice.
  const invoice = await findOneByColumns(em, LightningInvoice, {
    paymentHash: input.paymentHash,
    environment: input.environment,
    direction: 'incoming',
    ...(input.invoiceId ? { id: input.invoiceId } : {}),
  });
  if (!invoice) return { outcome: { state: 'failed', reason: 'incorrect_or_unknown_payment_details' } };
  if (input.amountMsat < BigInt(invoice.amountMsat)) return { outcome: { state: 'failed', reason: 'incorrect_or_unknown_payment_details' }, invoiceId: invoice.id };
  const now = new Date();
  const [paid] = await updateReturning(
    em,
    LightningInvoice,
    input.settledByNode ? { id: invoice.id, status: { $in: ['pending', 'expired'] } } : { id: invoice.id, status: 'pending', expiresAt: { $gt: now } },
    { status: 'paid', updatedAt: now, paidByPaymentId: input.paidByPaymentId },
  );
  if (!paid) {
    await em.refresh(invoice);
    const ours = invoice.status === 'paid' && input.paidByPaymentId !== null && invoice.paidByPaymentId === input.paidByPaymentId;
    return {
      outcome: ours ? { state: 'succeeded', preimage: invoice.preimage, feeMsat: 0n } : { state: 'failed', reason: invoice.status === 'paid' ? 'invoice_already_paid' : 'invoice_expired' },
      invoiceId: invoice.id,
    };
  }
  await applyBalanceEntry(em, { organizationId: invoice.organization.id, environment: invoice.environment, currency: 'sat', kind: 'credit', amount: msatToSat(BigInt(invoice.amountMsat)), reference: { type: 'lightning_invoice', id: invoice.id } });
  await emit(em, { organizationId: invoice.organization.id, environment: invoice.environment, type: 'lightning.invoice.paid', data: presentInvoice(invoice), dedupeKey: `lightning.invoice.paid:${invoice.id}` });
  return { outcome: { state: 'succeeded', preimage: invoice.preimage, feeMsat: 0n }, invoiceId: invoice.id };
}

const emitExpired = (em: EntityManager, invoice: LightningInvoice) =>
  emit(em, { organizationId: invoice.organization.id, environment: invoice.environment, type: 'lightning.invoice.expired', data: presentInvoice(invoice), dedupeKey: `lightning.invoice.expired:${invoice.id}` });

/** An invoice workflow's expiry timer fired (invoices created before the expiry sweep): pending becomes expired (a paid invoice stays paid). */
export async function expireInvoice(em: EntityManager, invoiceId: string, at: Date): Promise<InvoiceStatus> {
  const updated = await em.nativeUpdate(LightningInvoice, { id: invoiceId, status: 'pending' }, { status: 'expired', updatedAt: at });
  const invoice = await em.findOneOrFail(LightningInvoice, { id: invoiceId });
  if (updated === 1) await emitExpired(em, invoice);
  return invoice.status;
}

/**
 * Expires up to `limit` pending incoming invoices whose expires_at is at or before `dueBy`, as
 * expireInvoice does (`updated_at` = expires_at, lightning.invoice.expired), in the caller's
 * transaction. Rows another transaction holds (a payment settling one) are skipped, not waited for:
 * the next batch or sweep takes them if they are still pending. Returns how many it expired.
 */
export async function expireDueInvoices(em: EntityManager, input: { dueBy: Date; limit: number; organizationId?: string }): Promise<number> {
  const rows = await em.getConnection().execute<{ id: string }[]>(
    `update lightning_invoices set status = 'expired', updated_at = expires_at
     where id in (
       select id from lightning_invoices
       where status = 'pending' and direction = 'incoming' and expires_at <= ? ${input.organizationId ? 'and organization_id = ?' : ''}
       order by expires_at limit ? for update skip locked)
     returning id`,
    [input.dueBy, ...(input.organizationId ? [input.organizationId] : []), input.limit],
    'all',
    em.getTransactionContext(),
  );
  if (rows.length === 0) return 0;
  const invoices = await em.find(LightningInvoice, { id: { $in: rows.map((row) => row.id) } });
  for (const invoice of invoices) await emitExpired(em, invoice);
  return invoices.length;
}
