import { Context } from '@temporalio/activity';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { DeliveryRelay, transactionalWithDispatch } from '../src/events/relay';
import type { Logger } from '../src/logger';

/**
 * For activities: a transaction whose emitted events are delivered as soon as it commits, through
 * the client of the running activity (the route layer does the same for requests).
 */
export const transactionWithEvents =
  (deps: { orm: Orm; config: Config; log: Logger }) =>
  <T>(work: (em: EntityManager) => Promise<T>): Promise<T> =>
    transactionalWithDispatch(deps.orm.em.fork(), new DeliveryRelay(Context.current().client, deps.config, deps.log), work);
