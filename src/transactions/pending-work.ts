import type { PendingWorkSource } from '../temporal/reconciler';
import { pendingWork } from '../temporal/reconciler';
import { OutgoingTransaction } from './entities';
import { transactionFlow } from './flows/transaction';

/** Sends not yet settled or released: each must have its `transaction-<id>` workflow running (locked funds never wait on nobody). */
export const transactionPendingWork: PendingWorkSource = {
  name: 'transaction',
  pending: async (em, query) => {
    const transactions = await em.find(
      OutgoingTransaction,
      {
        status: { $nin: ['confirmed', 'failed'] },
        createdAt: { $lt: query.olderThan },
        ...(query.organizationId ? { organization: query.organizationId } : {}),
      },
      { limit: query.limit, orderBy: { createdAt: 'asc' } },
    );
    return transactions.map((transaction) => pendingWork(transactionFlow, { transactionId: transaction.id }, transaction.organization.id));
  },
};
