import type { EntityManager } from '@mikro-orm/postgresql';
import { errors } from './errors';

/** One cap on how many of a resource an owner may hold (docs/limits.md). */
export interface CountLimit {
  /** What is counted, as the error's details name it: `webhook_endpoints`, `api_keys`... */
  resource: string;
  /** Who holds them, for the lock: `<organization>:<environment>`, or a policy's id for its rules. */
  owner: string;
  /** The owner as the message names it: `environment`, `policy`. */
  holder: string;
  limit: number;
  /** The configuration variable that sets `limit`, named in the message for the operator. */
  setting: string;
  /** How the caller frees a slot: `delete one`, `revoke one`... */
  remedy: string;
  /** How many the owner holds now (the ones that count: not deleted, revoked or archived). */
  count: (em: EntityManager) => Promise<number>;
}

/**
 * Refuses one more of the resource (409 `limit_reached`, details resource, limit and current) when
 * its owner holds `limit` already. Every creation counts under one transaction-scoped advisory lock
 * per owner and resource, so two creations racing at limit - 1 cannot both pass: the second counts
 * once the first has committed. Removing one needs no lock: it only frees a slot.
 */
export async function assertBelowLimit(em: EntityManager, cap: CountLimit): Promise<void> {
  await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`limit:${cap.resource}:${cap.owner}`]);
  const current = await cap.count(em);
  if (current < cap.limit) return;
  const noun = cap.resource.replace(/_/g, ' ');
  throw errors.conflict('limit_reached', `This ${cap.holder} holds ${current} ${noun}, the most it may (${cap.setting}=${cap.limit}); ${cap.remedy} first.`, {
    resource: cap.resource,
    limit: cap.limit,
    current,
  });
}
