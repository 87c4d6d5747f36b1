import type { EntityManager } from '@mikro-orm/postgresql';
import { pendingWork, type PendingWork, type PendingWorkQuery, type PendingWorkSource } from '../temporal/reconciler';
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
export const cardPendingWork: PendingWorkSource = {
  name: 'card',
  async pending(em: EntityManager, query: PendingWorkQuery): Promise<PendingWork[]> {
    const scope = query.organizationId ? { organization: query.organizationId } : {};
    const work = new Map<string, PendingWork>();
    const add = (item: PendingWork) => work.set(item.workflowId, item);

    const provisioning = await em.find(Card, { ...scope, createdStatus: 'processing', createdAt: { $lt: query.olderThan } }, { limit: query.limit });
    for (const card of provisioning) add(pendingWork(cardProvisioningFlow, { cardId: card.id }, card.organization.id));

    const settling = await em.find(
      CardTransaction,
      { ...scope, status: 'pending', type: { $in: ['funding', 'withdrawal'] }, createdAt: { $lt: query.olderThan } },
      { limit: query.limit },
    );
    for (const transaction of settling) {
      const cardId = transaction.card.id;
      add(
        transaction.reference === initialFundingReference(cardId)
          ? pendingWork(cardProvisioningFlow, { cardId }, transaction.organization.id)
          : pendingWork(cardBalanceFlow, { transactionId: transaction.id }, transaction.organization.id),
      );
    }

    const terminating = await em.find(
      Card,
      { ...scope, status: { $ne: 'terminated' }, terminationRequestedAt: { $lt: query.olderThan } },
      { limit: query.limit },
    );
    for (const card of terminating) {
      add(pendingWork(cardTerminationFlow, { cardId: card.id, terminableAt: terminableAt(card).toISOString() }, card.organization.id));
    }
    return [...work.values()];
  },
};
