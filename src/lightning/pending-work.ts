import type { EntityManager } from '@mikro-orm/postgresql';
import { pendingWork, type PendingWorkQuery, type PendingWorkSource } from '../temporal/reconciler';
import { LightningInvoice } from './entities';
import { lightningPaymentFlow } from './flows/payment';

const pendingPayments = (em: EntityManager, query: PendingWorkQuery) =>
  em.find(
    LightningInvoice,
    { direction: 'outgoing', status: 'pending', createdAt: { $lt: query.olderThan }, ...(query.organizationId ? { organization: query.organizationId } : {}) },
    { orderBy: { createdAt: 'asc' }, limit: query.limit },
  );

/** Pending Lightning payments, each of which a running workflow must be carrying (pending invoices are the expiry sweep's). */
export const lightningPendingWork: PendingWorkSource[] = [
  {
    name: 'lightning payment',
    pending: async (em, query) =>
      (await pendingPayments(em, query)).map((payment) => pendingWork(lightningPaymentFlow, { paymentId: payment.id }, payment.organization.id)),
  },
];
