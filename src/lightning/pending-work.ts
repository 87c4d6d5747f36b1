import { pendingRows, pendingWork, type PendingWorkSource } from '../temporal/reconciler';
import { LightningInvoice } from './entities';
import { lightningPaymentFlow } from './flows/payment';

/** Pending Lightning payments, each of which a running workflow must be carrying (pending invoices are the expiry sweep's). */
export const lightningPendingWork: PendingWorkSource[] = [
  {
    name: 'lightning payment',
    pending: async (em, query) => {
      const { rows, next } = await pendingRows(em, LightningInvoice, { direction: 'outgoing', status: 'pending', createdAt: { $lt: query.olderThan } }, query);
      return { work: rows.map((payment) => pendingWork(lightningPaymentFlow, { paymentId: payment.id }, payment.organization.id)), next };
    },
  },
];
