import type { Config } from '../src/config';
import { scheduledTick, syncSchedule, type ScheduleDeps } from '../src/consolidation/schedules';
import type { Orm } from '../src/db/orm';
import type { Logger } from '../src/logger';
import { activityClient, transactionWithStarts } from './with-starts';

/** A rule's Schedule (src/consolidation/schedules.ts): its ticks, and bringing it in line with the rule. */
export const createConsolidationRuleActivities = (deps: { config: Config; orm: Orm; log: Logger }) => {
  // The activity's own Temporal client: the one its worker is connected with.
  const scheduleDeps = (): ScheduleDeps => ({ config: deps.config, client: activityClient(), em: () => deps.orm.em.fork(), transaction: transactionWithStarts(deps) });
  return {
    consolidationScheduledTick: (input: { ruleId: string }) => scheduledTick(scheduleDeps(), input.ruleId),
    syncConsolidationSchedule: (input: { ruleId: string }) => syncSchedule(scheduleDeps(), input.ruleId),
  };
};
