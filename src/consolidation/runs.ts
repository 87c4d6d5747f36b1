import type { EntityManager } from '@mikro-orm/postgresql';
import { recordStart } from '../temporal/starter';
import { ConsolidationRule, ConsolidationRun, type TriggerSource } from './entities';
import { consolidationRunFlow } from './flows/run';

export interface RunTrigger {
  source: TriggerSource;
  /** Manual: the member, or the API key without a member, that asked. */
  userId?: string | null;
  /** Manual: the key that asked. */
  keyId?: string | null;
  /** What fired it, kept when it joins a run in progress (the deposit id of a threshold trigger...). */
  detail?: string;
}

/**
 * Starts a run of `ruleId`, one at a time per rule: under the rule's row lock, a rule with a run in
 * progress (`active_run_id`) gets the trigger counted on that run (its last one kept), not a second run; otherwise a
 * new run (`pending`) becomes the active one and workflow `consolidation-run-<id>` is recorded to
 * start after the caller's commit. A disabled or deleted rule starts nothing (null), nor does a
 * paused one unless the trigger is manual.
 */
export async function triggerRun(em: EntityManager, ruleId: string, trigger: RunTrigger): Promise<{ run: ConsolidationRun; started: boolean } | null> {
  await em.execute('select id from consolidation_rules where id = ? for update', [ruleId]);
  const rule = await em.findOneOrFail(ConsolidationRule, { id: ruleId }, { refresh: true });
  // A paused rule (its key revoked) triggers nothing by itself; a manual run acts for the key that asks.
  if (!rule.enabled || rule.deletedAt || (rule.automationPausedAt && trigger.source !== 'manual')) return null;
  if (rule.activeRunId) {
    const active = await em.findOneOrFail(ConsolidationRun, { id: rule.activeRunId }, { refresh: true });
    // The rule's row lock serializes triggers, so the count read here is the latest one.
    active.recordedTriggerCount += 1;
    active.lastRecordedTrigger = { source: trigger.source, at: new Date().toISOString(), ...(trigger.detail ? { detail: trigger.detail } : {}) };
    await em.flush();
    return { run: active, started: false };
  }
  const run = em.create(ConsolidationRun, {
    organization: rule.organization,
    environment: rule.environment,
    rule,
    vault: rule.vault,
    chain: rule.chain,
    network: rule.network,
    status: 'pending',
    triggerSource: trigger.source,
    initiatedByUserId: trigger.userId ?? null,
    initiatedByKeyId: trigger.keyId ?? null,
  });
  rule.activeRunId = run.id;
  await em.flush();
  recordStart(em, consolidationRunFlow, { runId: run.id }, rule.organization.id);
  return { run, started: true };
}

/** Frees the rule for its next run, once the run has finished (its workflow's last step). */
export async function releaseRule(em: EntityManager, run: ConsolidationRun): Promise<void> {
  await em.nativeUpdate(ConsolidationRule, { id: run.rule.id, activeRunId: run.id }, { activeRunId: null });
}

