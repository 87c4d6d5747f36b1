import { proxyActivities } from '@temporalio/workflow';
import type { createConsolidationRuleActivities } from '../activities/consolidation-rules';
import type { consolidationScheduleFlow } from '../src/consolidation/flows/schedule';
import type { WorkflowOf } from '../src/temporal/flow';

/** A tick must not outlive the next one; Temporal being unreachable for long is retried by the next sync or tick. */
const { consolidationScheduledTick, syncConsolidationSchedule } = proxyActivities<ReturnType<typeof createConsolidationRuleActivities>>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * A tick of a rule's Schedule (`consolidation-schedule-<ruleId>`): triggers a scheduled run, or
 * syncs the Schedule when the rule no longer runs on it. A change of the rule
 * (`consolidation-schedule-sync-<ruleId>-<change>`): brings the Schedule in line with the rule.
 */
export const consolidationScheduleWorkflow: WorkflowOf<typeof consolidationScheduleFlow> = async (input) => {
  if ('tick' in input) return consolidationScheduledTick({ ruleId: input.ruleId });
  await syncConsolidationSchedule({ ruleId: input.ruleId });
  return 'synced';
};
