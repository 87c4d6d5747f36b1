import type { EntityManager } from '@mikro-orm/postgresql';
import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import type { Config } from '../config';
import { uuid } from '../shared/ids';
import { resourceSearchAttributes } from '../temporal/search-attributes';
import { recordStart } from '../temporal/starter';
import { ConsolidationRule } from './entities';
import { consolidationScheduleFlow, consolidationScheduleId, type ScheduleOutcome } from './flows/schedule';
import { triggerRun } from './runs';

// ---- schedule_cron: a strict five-field check ----

/**
 * The subset of cron every implementation, Temporal's included, reads the same way: numbers, `*`,
 * ranges `a-b`, steps `/n`, comma lists, JAN-DEC and SUN-SAT names. Anything else (seconds, years,
 * `L`, `W`, `#`, `?`, `@hourly`) is refused rather than left to a parser that might read it otherwise.
 */
const CRON_FIELDS = [
  { name: 'minute', min: 0, max: 59, names: [] as string[], firstName: 0 },
  { name: 'hour', min: 0, max: 23, names: [], firstName: 0 },
  { name: 'day of month', min: 1, max: 31, names: [], firstName: 0 },
  { name: 'month', min: 1, max: 12, names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'], firstName: 1 },
  // 7 is Sunday too, as in Vixie cron.
  { name: 'day of week', min: 0, max: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'], firstName: 0 },
];
type CronField = (typeof CRON_FIELDS)[number];

function cronValue(token: string, field: CronField): number | null {
  if (/^\d{1,2}$/.test(token)) {
    const number = Number(token);
    return number >= field.min && number <= field.max ? number : null;
  }
  const index = field.names.indexOf(token.toUpperCase());
  return index >= 0 ? index + field.firstName : null;
}

/** Why `item` (one comma-separated part of a field) is not valid, or null when it is. */
function cronItemProblem(item: string, field: CronField): string | null {
  const [range, step, extra] = item.split('/');
  if (extra !== undefined || !range) return `'${item}' is not a valid ${field.name}`;
  if (step !== undefined && (!/^\d{1,2}$/.test(step) || Number(step) < 1 || Number(step) > field.max)) return `'${step}' is not a valid ${field.name} step`;
  if (range === '*') return null;
  const [from, to, more] = range.split('-');
  if (more !== undefined) return `'${range}' is not a valid ${field.name} range`;
  const start = cronValue(from!, field);
  if (start === null) return `'${from}' is not a valid ${field.name} (${field.min}-${field.max})`;
  if (to === undefined) return null;
  const end = cronValue(to, field);
  if (end === null) return `'${to}' is not a valid ${field.name} (${field.min}-${field.max})`;
  return end < start ? `the ${field.name} range '${range}' ends before it starts` : null;
}

/** Why `expression` is not a valid five-field cron expression, or null when it is. */
export function cronProblem(expression: string): string | null {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== CRON_FIELDS.length) return `a cron expression has 5 fields (minute hour day-of-month month day-of-week), not ${parts.length}`;
  for (const [index, part] of parts.entries()) {
    for (const item of part.split(',')) {
      const problem = cronItemProblem(item, CRON_FIELDS[index]!);
      if (problem) return problem;
    }
  }
  return null;
}

/** The values one field of a valid expression (cronProblem null) fires on, in order. */
function cronFieldValues(part: string, field: CronField): number[] {
  const values = new Set<number>();
  for (const item of part.split(',')) {
    const [range, step] = item.split('/') as [string, string | undefined];
    const [from, to] = range === '*' ? [field.min, field.max] : range.split('-').map((token) => cronValue(token, field)!);
    // `a/n` runs from a to the field's end, as in Vixie cron.
    const end = to ?? (step === undefined ? from! : field.max);
    for (let value = from!; value <= end; value += Number(step ?? 1)) values.add(value);
  }
  return [...values].sort((a, b) => a - b);
}

/**
 * The shortest time between two ticks of a valid expression, in minutes, up to 60 (one tick an hour
 * or fewer: 60): the gaps between its minutes, and from the hour's last minute to the next hour's
 * first when two consecutive hours (23 and 0 included) both fire.
 */
export function cronShortestInterval(expression: string): number {
  const [minutePart, hourPart] = expression.trim().split(/\s+/) as [string, string];
  const minutes = cronFieldValues(minutePart, CRON_FIELDS[0]!);
  const hours = new Set(cronFieldValues(hourPart, CRON_FIELDS[1]!));
  const gaps = minutes.slice(1).map((minute, index) => minute - minutes[index]!);
  if ([...hours].some((hour) => hours.has((hour + 1) % 24))) gaps.push(60 - minutes[minutes.length - 1]! + minutes[0]!);
  return Math.min(60, ...gaps);
}

// ---- The rule's Temporal Schedule ----

/**
 * Records, in the transaction that changes a rule, a workflow that brings the rule's Schedule in
 * line once that change has committed: a request never calls Temporal itself, so Temporal being
 * down loses nothing (the start sweep fires the recorded start when it is back).
 */
export function recordScheduleSync(em: EntityManager, rule: ConsolidationRule): void {
  recordStart(em, consolidationScheduleFlow, { ruleId: rule.id, change: uuid() }, rule.organization.id);
}

/** A catch-up window: a tick missed while Temporal was down longer than this is skipped, not replayed. */
const CATCHUP_WINDOW = '5 minutes';

function scheduleOptions(config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_SEARCH_ATTRIBUTES'>, rule: ConsolidationRule): ScheduleOptions {
  const scheduleId = consolidationScheduleId(rule.id);
  return {
    scheduleId,
    spec: { cronExpressions: [rule.scheduleCron!], timezone: 'UTC' },
    action: {
      type: 'startWorkflow',
      workflowType: consolidationScheduleFlow.workflowType,
      workflowId: scheduleId,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      args: [{ ruleId: rule.id, tick: true }],
      workflowExecutionTimeout: '10 minutes',
      ...(config.TEMPORAL_SEARCH_ATTRIBUTES
        ? { typedSearchAttributes: resourceSearchAttributes({ organizationId: rule.organization.id, type: 'consolidation_rule', id: rule.id }) }
        : {}),
    },
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: CATCHUP_WINDOW },
    state: { paused: !rule.enabled, note: rule.enabled ? 'rule enabled' : 'rule disabled' },
    memo: { description: `Triggers consolidation rule ${rule.id} on its schedule_cron (UTC)` },
  };
}

export interface ScheduleDeps {
  config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_SEARCH_ATTRIBUTES'>;
  client: Client;
  em: () => EntityManager;
  /** A transaction whose recorded workflow starts fire once it commits. */
  transaction: <T>(work: (em: EntityManager) => Promise<T>) => Promise<T>;
}

/**
 * Brings the rule's Schedule in line with the rule as it is now: none for a deleted rule or one not
 * triggered on a schedule; otherwise the rule's cron in UTC, paused while the rule is disabled.
 * Idempotent. Holds the rule's advisory lock throughout, so two syncs of one rule do not
 * interleave: the last one to run reads the last committed state and leaves the Schedule so.
 */
export async function syncSchedule(deps: ScheduleDeps, ruleId: string): Promise<void> {
  await deps.em().transactional(async (em) => {
    await em.execute('select pg_advisory_xact_lock(hashtext(?))', [consolidationScheduleId(ruleId)]);
    const rule = await em.findOne(ConsolidationRule, { id: ruleId });
    const handle = deps.client.schedule.getHandle(consolidationScheduleId(ruleId));
    if (!rule || rule.deletedAt || rule.triggerType !== 'scheduled' || !rule.scheduleCron) {
      await handle.delete().catch((error: unknown) => {
        if (!(error instanceof ScheduleNotFoundError)) throw error;
      });
      return;
    }
    const options = scheduleOptions(deps.config, rule);
    try {
      await deps.client.schedule.create(options);
      return;
    } catch (error) {
      if (!(error instanceof ScheduleAlreadyRunning)) throw error;
    }
    await handle.update((previous) => ({ ...previous, spec: options.spec, action: options.action as never, policies: { ...previous.policies, ...options.policies } }));
    const { state } = await handle.describe();
    if (state.paused && rule.enabled) await handle.unpause('rule enabled');
    if (!state.paused && !rule.enabled) await handle.pause('rule disabled');
  });
}

/**
 * One tick of the rule's Schedule: a scheduled run (or the trigger recorded on the run in
 * progress). A rule that is disabled, deleted or no longer scheduled starts nothing, and its
 * Schedule is brought in line (a change whose sync has not run yet).
 */
export async function scheduledTick(deps: ScheduleDeps, ruleId: string): Promise<ScheduleOutcome> {
  const triggered = await deps.transaction(async (em) => {
    const rule = await em.findOne(ConsolidationRule, { id: ruleId });
    if (!rule || rule.triggerType !== 'scheduled') return null;
    return triggerRun(em, ruleId, { source: 'scheduled' });
  });
  if (triggered) return triggered.started ? 'started' : 'recorded';
  await syncSchedule(deps, ruleId);
  return 'synced';
}
