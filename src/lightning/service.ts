import { randomBytes } from 'node:crypto';
import type { EntityManager, ObjectQuery } from '@mikro-orm/postgresql';
import { sha256 } from '@noble/hashes/sha2';
import type { Environment } from '../api-keys/entities';
import { applyBalanceEntry } from '../balances/service';
import { assetById } from '../catalogue/service';
import type { Config } from '../config';
import { detachedRow, findOneByColumns, readOneByColumns, sql, updateReturning } from '../db/lean';
import { emit } from '../events/service';
import { judgeMovement } from '../movements/gate';
import type { Caller } from '../policies/service';
import { DomainError, errors } from '../shared/errors';
import type { KeyService } from '../keys/service';
import { isUuid, uuid } from '../shared/ids';
import { unixSeconds } from '../shared/time';
import { recordStart } from '../temporal/starter';
import { isExpired, msatToSat, satsToDebit } from './amounts';
import { Bolt11Error, decodeBolt11, encodeBolt11, networkForEnvironment, type DecodedInvoice } from './bolt11';
import { lightningNodeUnavailable } from './lnd';
import { LightningInvoice, type InvoiceDirection, type InvoiceStatus } from './entities';
import { lightningPaymentFlow } from './flows/payment';
import { MAX_PAYMENT_SATS } from './schemas';
import { withNodeKey } from './node-key';
import { presentInvoice, presentPayment } from './presenters';
import { NO_LIGHTNING_NODES, providerFor, remoteProvidersOf, type LightningNodes, type PaymentOrder, type PaymentOutcome } from './provider';
import { withArticle } from '../shared/articles';

const MIN_FINAL_CLTV = 40;

export interface Tenant {
  organizationId: string;
  environment: Environment;
}

export function decodePaymentRequest(request: string): DecodedInvoice {
  try {
    return decodeBolt11(request);
  } catch (error) {
    if (!(error instanceof Bolt11Error)) throw error;
    throw new DomainError({ kind: 'invalid', code: 'invalid_payment_request', message: `Invalid BOLT11 payment request: ${error.message}.`, param: 'request' });
  }
}

/** Whose and which environment's records a call may see and touch. */
const tenantFilter = (tenant: Tenant) => ({ organization: tenant.organizationId, environment: tenant.environment });

/** The record a reference already names in this environment, or null. */
const byReference = (em: EntityManager, tenant: Tenant, direction: InvoiceDirection, reference: string) =>
  findOneByColumns(em, LightningInvoice, { ...tenantFilter(tenant), direction, reference });

/** A reference repeated with other parameters: 409, and the original is left as it was. */
function referenceReused(record: LightningInvoice, param: string) {
  const what = record.direction === 'incoming' ? 'invoice' : 'payment';
  return new DomainError({
    kind: 'idempotency',
    code: 'idempotency_key_reused',
    message: `The reference '${record.reference}' was already used for ${withArticle(what)} with a different ${param}; use a new reference for a new ${what}.`,
    param,
    details: { reference: record.reference, [`${what}_id`]: record.id },
  });
}

/** The columns of a new lightning_invoices row (status pending, fee 0). */
interface NewRecordRow {
  id: string;
  organizationId: string;
  environment: Environment;
  direction: InvoiceDirection;
  reference: string;
  customerId: string | null;
  paymentHash: string;
  request: string;
  destination: string;
  preimage: string;
  amountMsat: string;
  maxFeeMsat: string | null;
  feeLimitMsat: string | null;
  description: string;
  expiresAt: Date;
  createdAt: Date;
}

/**
 * Inserts a row unless a unique key of lightning_invoices already holds its values, and returns the
 * row as inserted, or undefined when nothing was inserted. A concurrent insert of the same key waits
 * for the other transaction and inserts nothing if that one commits.
 */
async function insertRowUnlessTaken(em: EntityManager, row: NewRecordRow): Promise<Record<string, unknown> | undefined> {
  const [inserted] = await sql(
    em,
    `insert into lightning_invoices (id, organization_id, environment, direction, status, reference, customer_id, payment_hash, request, destination, preimage,
       amount_msat, fee_msat, max_fee_msat, fee_limit_msat, description, expires_at, created_at)
     values ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $10, $11, 0, $12, $13, $14, $15, $16)
     on conflict do nothing returning *`,
    [row.id, row.organizationId, row.environment, row.direction, row.reference, row.customerId, row.paymentHash, row.request,
      row.destination, row.preimage, row.amountMsat, row.maxFeeMsat, row.feeLimitMsat, row.description, row.expiresAt, row.createdAt],
  );
  return inserted;
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

/** One of the tenant's records; another organization's or the other environment's id is 404 alike. */
export async function findRecord(em: EntityManager, tenant: Tenant, id: string, direction?: InvoiceDirection, resource = 'lightning invoice') {
  const record = isUuid(id) ? await em.findOne(LightningInvoice, { id, ...tenantFilter(tenant), ...(direction ? { direction } : {}) }) : null;
  if (!record) throw errors.notFound(resource, id);
  return record;
}

/**
 * A status filter as reads present it (presentedStatus): an incoming invoice still pending past its
 * expiry, which the sweep has not reached yet, counts as expired.
 */
function statusFilter(status: InvoiceStatus, now: Date): ObjectQuery<LightningInvoice> {
  const overdue = { status: 'pending', direction: 'incoming', expiresAt: { $lte: now } } as const;
  if (status === 'expired') return { $or: [{ status: 'expired' }, overdue] };
  if (status === 'pending') return { status: 'pending', $not: overdue };
  return { status };
}

export async function listRecords(em: EntityManager, tenant: Tenant, query: { page: number; page_size: number; status?: InvoiceStatus; direction?: InvoiceDirection }) {
  const where = { ...tenantFilter(tenant), ...(query.status ? statusFilter(query.status, new Date()) : {}), ...(query.direction ? { direction: query.direction } : {}) };
  const [records, total] = await em.findAndCount(LightningInvoice, where, {
    orderBy: { createdAt: 'desc', id: 'desc' },
    limit: query.page_size,
    offset: (query.page - 1) * query.page_size,
  });
  return { records, total };
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
  const provider = invoice.network !== nodes.network(tenant.environment) ? null : await providerFor(em, tenant.environment, invoice, noSettlement, remoteProvidersOf(nodes), nodes);
  const estimate = provider ? await provider.estimate(invoice, amountMsat) : { routeFound: false, feeMsat: 0n };
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
    estimate: { invoice, amountMsat, feeMsat: estimate.feeMsat, routeFound: estimate.routeFound },
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
  const feeLimitMsat = maxFeeMsat ?? feeMsat;
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
