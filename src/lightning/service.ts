/**
 * The lightning_invoices rows both directions share: the tenant's scope, the lookup and the
 * conflict-free insert by reference, the 409 of a reused reference, and the reads of records.
 * Invoices are in invoices.ts, payments in payments.ts.
 */
import type { EntityManager, ObjectQuery } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { findOneByColumns, readOneByColumns, sql } from '../db/lean';
import { DomainError, errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { LightningInvoice, type InvoiceDirection, type InvoiceStatus } from './entities';
import { withArticle } from '../shared/articles';

export interface Tenant {
  organizationId: string;
  environment: Environment;
}

/** Whose and which environment's records a call may see and touch. */
export const tenantFilter = (tenant: Tenant) => ({ organization: tenant.organizationId, environment: tenant.environment });

/** The record a reference already names in this environment, or null. */
export const byReference = (em: EntityManager, tenant: Tenant, direction: InvoiceDirection, reference: string) =>
  findOneByColumns(em, LightningInvoice, { ...tenantFilter(tenant), direction, reference });

/** A reference repeated with other parameters: 409, and the original is left as it was. */
export function referenceReused(record: LightningInvoice, param: string) {
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
export interface NewRecordRow {
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
export async function insertRowUnlessTaken(em: EntityManager, row: NewRecordRow): Promise<Record<string, unknown> | undefined> {
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

/** One of the tenant's records; another organization's or the other environment's id is 404 alike. */
export async function findRecord(em: EntityManager, tenant: Tenant, id: string, direction?: InvoiceDirection, resource = 'lightning invoice') {
  const record = isUuid(id) ? await em.findOne(LightningInvoice, { id, ...tenantFilter(tenant), ...(direction ? { direction } : {}) }) : null;
  if (!record) throw errors.notFound(resource, id);
  return record;
}

/**
 * The same for a GET that only presents it: a detached copy read by a prepared statement (src/db/lean.ts),
 * never in an entity manager, so `em` may be the process's own (`deps.orm.em`).
 */
export async function readRecord(em: EntityManager, tenant: Tenant, id: string, direction?: InvoiceDirection, resource = 'lightning invoice') {
  const record = isUuid(id) ? await readOneByColumns(em, LightningInvoice, { id, ...tenantFilter(tenant), ...(direction ? { direction } : {}) }) : null;
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
