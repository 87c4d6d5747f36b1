import type { EntityManager } from '@mikro-orm/postgresql';
import { pendingWork, type PendingWorkQuery, type PendingWorkSource } from '../temporal/reconciler';
import { iso } from '../shared/time';
import { LightningInvoice, type InvoiceDirection } from './entities';
import { lightningInvoiceFlow } from './flows/invoice';
import { lightningPaymentFlow } from './flows/payment';

const pendingRecords = (em: EntityManager, direction: InvoiceDirection, query: PendingWorkQuery) =>
  em.find(
    LightningInvoice,
    { direction, status: 'pending', createdAt: { $lt: query.olderThan }, ...(query.organizationId ? { organization: query.organizationId } : {}) },
    { orderBy: { createdAt: 'asc' }, limit: query.limit },
  );

/** Pending Lightning payments and invoices, each of which a running workflow must be carrying. */
export const lightningPendingWork: PendingWorkSource[] = [
  {
    name: 'lightning payment',
    pending: async (em, query) =>
      (await pendingRecords(em, 'outgoing', query)).map((payment) => pendingWork(lightningPaymentFlow, { paymentId: payment.id }, payment.organization.id)),
  },
  {
    name: 'lightning invoice',
    pending: async (em, query) =>
      (await pendingRecords(em, 'incoming', query)).map((invoice) =>
        pendingWork(lightningInvoiceFlow, { invoiceId: invoice.id, expiresAt: iso(invoice.expiresAt) }, invoice.organization.id),
      ),
  },
];
