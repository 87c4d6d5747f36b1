import { defineFlow } from '../../temporal/flow';

/**
 * A scheduled rule's workflow, in two uses. As the action of the rule's Temporal Schedule
 * (`consolidation-schedule-<ruleId>`, `tick`): trigger a run (source scheduled), and when the rule
 * is no longer an enabled scheduled rule, bring the Schedule in line instead. Recorded after a rule
 * changes (`change`, one workflow per change): bring the Schedule in line with the rule as it is
 * now (create, update, pause, unpause or delete it). Shared by src/consolidation/schedules.ts and
 * workflows/consolidation-schedule.ts. Workflow-safe: no Node APIs.
 */
export type ScheduleInput = { ruleId: string; tick: true } | { ruleId: string; change: string };

/** tick: a run started, the trigger recorded on the run in progress, or the Schedule synced (the rule no longer runs on it); change: synced. */
export type ScheduleOutcome = 'started' | 'recorded' | 'synced';

export const consolidationScheduleId = (ruleId: string) => `consolidation-schedule-${ruleId}`;

export const consolidationScheduleFlow = defineFlow<ScheduleInput, ScheduleOutcome>({
  workflowType: 'consolidationScheduleWorkflow',
  workflowId: (input) => ('change' in input ? `consolidation-schedule-sync-${input.ruleId}-${input.change}` : consolidationScheduleId(input.ruleId)),
  resource: (input) => ({ type: 'consolidation_rule', id: input.ruleId }),
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
