import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import type { Logger } from '../src/logger';
import { WorkflowStarter } from '../src/temporal/starter';

/** The running activity's own Temporal client, for what is no workflow start or message: a consolidation rule's Schedule. */
export const activityClient = (): Client => Context.current().client;

/** The starter of the running activity: it fires on that activity's own Temporal client and task queue. */
export const activityStarter = (deps: { config: Config; log: Logger }): WorkflowStarter => new WorkflowStarter(Context.current().client, deps.config, deps.log);

/**
 * For activities: a transaction whose recorded workflow starts are fired as soon as it commits, as
 * the route layer does for requests. Webhook deliveries are fired without the activity waiting for
 * them, so a money flow takes as long with twelve endpoints as with none (the sweep catches any
 * delivery start the process does not make).
 */
export const transactionWithStarts =
  (deps: { orm: Orm; config: Config; log: Logger }) =>
  <T>(work: (em: EntityManager) => Promise<T>): Promise<T> =>
    activityStarter(deps).transaction(deps.orm.em.fork(), work, { detachDeliveries: true });
