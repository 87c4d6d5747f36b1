import { pendingRows, pendingWork, type PendingWorkSource } from '../temporal/reconciler';
import { Card, CardTransaction } from './entities';
import { cardBalanceFlow } from './flows/balance';
import { cardProvisioningFlow } from './flows/provisioning';
import { cardTerminationFlow } from './flows/termination';
import { initialFundingReference } from './presenters';
import { terminableAt } from './service';

/**
 * Cards a workflow must be carrying: cards still provisioning, fundings and withdrawals still
 * settling (an initial funding is the provisioning workflow's), and cards accepted for termination
 * but not terminated.
 */
export const cardPendingWork: PendingWorkSource[] = [
  {
    name: 'card',
    pending: async (em, query) => {
      const { rows, next } = await pendingRows(em, Card, { createdStatus: 'processing', createdAt: { $lt: query.olderThan } }, query);
      return { work: rows.map((card) => pendingWork(cardProvisioningFlow, { cardId: card.id }, card.organization.id)), next };
    },
  },
  {
    name: 'card transaction',
    pending: async (em, query) => {
      const { rows, next } = await pendingRows(
        em,
        CardTransaction,
        { status: 'pending', type: { $in: ['funding', 'withdrawal'] }, createdAt: { $lt: query.olderThan } },
        query,
      );
      const work = rows.map((transaction) => {
        const cardId = transaction.card.id;
        return transaction.reference === initialFundingReference(cardId)
          ? pendingWork(cardProvisioningFlow, { cardId }, transaction.organization.id)
          : pendingWork(cardBalanceFlow, { transactionId: transaction.id }, transaction.organization.id);
      });
      return { work, next };
    },
  },
  {
    name: 'card termination',
    pending: async (em, query) => {
      const { rows, next } = await pendingRows(em, Card, { status: { $ne: 'terminated' }, terminationRequestedAt: { $lt: query.olderThan } }, query);
      return {
        work: rows.map((card) => pendingWork(cardTerminationFlow, { cardId: card.id, terminableAt: terminableAt(card).toISOString() }, card.organization.id)),
        next,
      };
    },
  },
];
