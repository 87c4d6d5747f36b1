import { pendingRows, pendingWork, type PendingWorkSource } from '../temporal/reconciler';
import { sponsorshipsFunding } from '../movements/funding';
import { OutgoingTransaction } from './entities';
import { transactionFlow } from './flows/transaction';

/**
 * Sends not yet settled or released: each must have its `transaction-<id>` workflow running (locked
 * funds never wait on nobody). A sponsored send waiting for its fuel is its sponsorship's to start.
 */
export const transactionPendingWork: PendingWorkSource = {
  name: 'transaction',
  pending: async (em, query) => {
    const { rows, next } = await pendingRows(em, OutgoingTransaction, { status: { $nin: ['confirmed', 'failed'] }, createdAt: { $lt: query.olderThan } }, query);
    const sponsored = rows.flatMap((transaction) => (transaction.sponsorshipId ? [transaction.sponsorshipId] : []));
    const funding = await sponsorshipsFunding(em, sponsored);
    const work = rows.filter((transaction) => !funding.has(transaction.sponsorshipId ?? '')).map((transaction) => pendingWork(transactionFlow, { transactionId: transaction.id }, transaction.organization.id));
    return { work, next };
  },
};
