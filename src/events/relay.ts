import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { WorkflowIdReusePolicy } from '@temporalio/common';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config';
import type { Logger } from '../logger';
import { resourceSearchAttributes } from '../temporal/search-attributes';
import { Delivery } from './entities';
import { takeCommittedDeliveries } from './service';

/** One workflow per delivery and run: a second start of the same run is refused by Temporal. */
export const deliveryWorkflowId = (deliveryId: string, run: number): string => `webhook-delivery-${deliveryId}-${run}`;

export interface DeliveryWorkflowInput {
  deliveryId: string;
  run: number;
  maxAttempts: number | null;
}

/**
 * The outbox relay: starts the delivery workflow of each undispatched delivery, then marks it
 * dispatched. Called right after a commit (the API's route layer) and by the periodic sweep; both
 * may race on one delivery, which is harmless because the workflow id is derived from it.
 */
export class DeliveryRelay {
  constructor(
    private readonly client: Client,
    private readonly config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_SEARCH_ATTRIBUTES'>,
    private readonly log: Logger,
  ) {}

  async dispatch(em: EntityManager, deliveryIds: string[]): Promise<number> {
    if (!deliveryIds.length) return 0;
    const deliveries = await em.find(Delivery, { id: { $in: deliveryIds }, dispatchedAt: null, status: 'pending' });
    for (const delivery of deliveries) {
      try {
        await this.client.workflow.start('webhookDeliveryWorkflow', {
          taskQueue: this.config.TEMPORAL_TASK_QUEUE,
          workflowId: deliveryWorkflowId(delivery.id, delivery.run),
          workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
          args: [{ deliveryId: delivery.id, run: delivery.run, maxAttempts: delivery.maxAttempts ?? null } satisfies DeliveryWorkflowInput],
          ...(this.config.TEMPORAL_SEARCH_ATTRIBUTES
            ? { typedSearchAttributes: resourceSearchAttributes({ organizationId: delivery.organization.id, type: 'event_delivery', id: delivery.id }) }
            : {}),
        });
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      }
      await em.nativeUpdate(Delivery, { id: delivery.id, run: delivery.run, dispatchedAt: null }, { dispatchedAt: new Date() });
    }
    return deliveries.length;
  }

  /** After a commit: starts what that transaction emitted. Failures are left to the sweep. */
  async dispatchAfterCommit(em: EntityManager, deliveryIds: string[]): Promise<void> {
    try {
      await this.dispatch(em, deliveryIds);
    } catch (error) {
      this.log.warn({ err: error, deliveries: deliveryIds.length }, 'delivery dispatch after commit failed; the sweep will retry');
    }
  }

  /** Starts deliveries still undispatched `graceSeconds` after they were written, oldest first. */
  async sweep(em: EntityManager, graceSeconds: number, batchSize = 1000): Promise<number> {
    const batch = await em.find(
      Delivery,
      { dispatchedAt: null, status: 'pending', updatedAt: { $lt: new Date(Date.now() - graceSeconds * 1000) } },
      { fields: ['id'], orderBy: { updatedAt: 'asc' }, limit: batchSize },
    );
    return this.dispatch(em.fork(), batch.map((delivery) => delivery.id));
  }
}

/**
 * For code outside the route layer (activities): runs `work` in a transaction and, once it has
 * committed, starts the deliveries it emitted, as the route layer does for requests. In an
 * activity: `transactionalWithDispatch(deps.orm.em.fork(), new DeliveryRelay(Context.current().client, deps.config, deps.log), ...)`.
 */
export async function transactionalWithDispatch<T>(em: EntityManager, relay: DeliveryRelay, work: (em: EntityManager) => Promise<T>): Promise<T> {
  let transaction: object | undefined;
  const result = await em.transactional(async (tx) => {
    transaction = tx.getTransactionContext();
    return work(tx);
  });
  const emitted = transaction ? takeCommittedDeliveries(transaction) : [];
  if (emitted.length) await relay.dispatchAfterCommit(em.fork(), emitted);
  return result;
}
