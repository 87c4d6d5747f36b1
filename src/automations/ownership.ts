import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { ApiKey } from '../api-keys/entities';
import { ConsolidationRule } from '../consolidation/entities';
import { emit } from '../events/service';
import { GasStation } from '../gas-stations/entities';
import { errors } from '../shared/errors';
import { OutgoingTransaction } from '../transactions/entities';

/**
 * Automations follow their owner (docs/policies.md, "Keys and people"): gas stations and
 * consolidation rules act for the key that set them up (`createdByKeyId`), the automatic fee bumps
 * of a send for the key that sent it. Revoking that key pauses them, durably and visibly
 * (`automation_paused_at` on the resource, event `automation.paused`); the refill, sweep and bump
 * steps check it before moving value. A key with the resource's scopes takes a paused one over and
 * becomes its owner (event `automation.resumed`).
 */
export type AutomationType = 'gas_station' | 'consolidation_rule' | 'fee_bump';

type Owned = GasStation | ConsolidationRule;

/** Sends whose automatic fee bumps may still come: not yet mined. */
const BUMPABLE_STATUSES = ['pending', 'signed', 'broadcast'] as const;

/** Pauses, in the revocation's transaction, every automation `key` owns, announcing each. */
export async function pauseAutomationsOf(em: EntityManager, key: ApiKey): Promise<void> {
  const pausedAt = key.revokedAt ?? new Date();
  const scope = { organizationId: key.organization.id, environment: key.environment };
  const owned = { organization: key.organization.id, environment: key.environment, createdByKeyId: key.id, automationPausedAt: null };
  const paused: [AutomationType, Owned][] = [
    ...(await em.find(GasStation, owned)).map((station): [AutomationType, Owned] => ['gas_station', station]),
    ...(await em.find(ConsolidationRule, { ...owned, deletedAt: null })).map((rule): [AutomationType, Owned] => ['consolidation_rule', rule]),
  ];
  for (const [type, automation] of paused) {
    automation.automationPausedAt = pausedAt;
    await announce(em, scope, 'automation.paused', { automation_type: type, automation_id: automation.id, revoked_api_key_id: key.id });
  }
  const sends = await em.find(
    OutgoingTransaction,
    { organization: key.organization.id, environment: key.environment, apiKeyId: key.id, status: { $in: [...BUMPABLE_STATUSES] } },
    { fields: ['id'] },
  );
  for (const send of sends) await announce(em, scope, 'automation.paused', { automation_type: 'fee_bump', automation_id: send.id, revoked_api_key_id: key.id });
}

/**
 * The caller's key becomes the owner of a paused automation (or of one whose key is revoked) and it
 * runs again: 409 `automation_not_paused` for one that is running under a live key.
 */
export async function takeOver<T extends Owned>(em: EntityManager, caller: AuthContext, type: Exclude<AutomationType, 'fee_bump'>, automation: T): Promise<T> {
  const previous = automation.createdByKeyId ?? null;
  const ownerRevoked = previous ? await em.count(ApiKey, { id: previous, revokedAt: { $ne: null } }) : 0;
  if (!automation.automationPausedAt && !ownerRevoked) {
    throw errors.conflict('automation_not_paused', 'This automation runs under a key that is not revoked: only a paused automation can be taken over.', { automation_id: automation.id });
  }
  Object.assign(automation, { createdByKeyId: caller.apiKeyId, automationPausedAt: null });
  await announce(em, caller, 'automation.resumed', { automation_type: type, automation_id: automation.id, api_key_id: caller.apiKeyId, previous_api_key_id: previous });
  return automation;
}

async function announce(em: EntityManager, scope: Pick<AuthContext, 'organizationId' | 'environment'>, type: 'automation.paused' | 'automation.resumed', data: Record<string, unknown>): Promise<void> {
  await emit(em, { organizationId: scope.organizationId, environment: scope.environment, type, data });
}
