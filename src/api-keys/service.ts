import { createHash, randomInt } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { errors } from '../shared/errors';
import type { Member, Organization } from '../organizations/entities';
import { findMember } from '../organizations/service';
import { LATEST_API_VERSION } from '../shared/api-versions';
import { iso } from '../shared/time';
import type { AuthContext } from './auth-context';
import { ApiKey, type Environment } from './entities';
import { provenance, sharedOrigins, type Origin } from './provenance';

const SECRET_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `sk_test_<32 base62 chars>` (about 190 bits), Stripe's shape; sandbox keys are `sk_test_`, live keys `sk_live_`. */
export function generateSecret(environment: Environment): string {
  let body = '';
  for (let i = 0; i < 32; i += 1) body += SECRET_ALPHABET[randomInt(SECRET_ALPHABET.length)];
  return `sk_${environment === 'live' ? 'live' : 'test'}_${body}`;
}

export const hashSecret = (secret: string): string => createHash('sha256').update(secret).digest('hex');

export const SECRET_PATTERN = /^sk_(test|live)_[0-9A-Za-z]{32}$/;

/** What else a revocation does, in its transaction (the automations the key owned pause, the governance log records who revoked it): the entry points hand it in. */
export type KeyRevocationHook = (em: EntityManager, key: ApiKey, revokedBy: AuthContext) => Promise<void>;

export interface NewApiKey {
  organization: Organization;
  name: string;
  scopes: string[];
  environment: Environment;
  apiVersion?: string;
  member?: Member | null;
  /** Minted for another member, who has yet to confirm it. */
  pendingConfirmation?: boolean;
  /** The calling key and the member it acts for; absent for the operator (CLI). */
  createdBy?: { apiKeyId: string; memberId: string | null };
}

/** Creates a key; the plaintext secret exists only in the return value, never in the database. */
export function createApiKey(em: EntityManager, input: NewApiKey): { key: ApiKey; secret: string } {
  const secret = generateSecret(input.environment);
  const key = em.create(ApiKey, {
    organization: input.organization,
    member: input.member ?? null,
    pendingConfirmation: input.pendingConfirmation ?? false,
    name: input.name,
    environment: input.environment,
    scopes: [...new Set(input.scopes)],
    apiVersion: input.apiVersion ?? LATEST_API_VERSION,
    secretHash: hashSecret(secret),
    secretLastFour: secret.slice(-4),
    createdByKeyId: input.createdBy?.apiKeyId ?? null,
    createdByMemberId: input.createdBy?.memberId ?? null,
    createdAt: new Date(),
  });
  return { key, secret };
}

/**
 * The member a key minted through the API acts for (docs/policies.md, "Keys and people"): the
 * minter's own member by default, or the member `user_id` names. Naming another member is an
 * owner's privilege, and the key then waits for that member's confirmation (`pending`). A key
 * acting for no member mints nothing: keys that act for nobody (service keys) come from the
 * operator's CLI alone.
 */
export async function memberForNewKey(
  em: EntityManager,
  caller: { organizationId: string; memberId: string | null },
  userId: string | undefined,
): Promise<{ member: Member; pending: boolean }> {
  if (!caller.memberId) {
    throw errors.permission(
      'member_required',
      'A key minted through the API acts for a member, and this key acts for none. Mint with a key that acts for a member; service keys (acting for no member) are made with the operator CLI (key:create).',
      userId ? { user_id: userId } : {},
    );
  }
  const own = await findMember(em, caller.organizationId, caller.memberId);
  if (!userId || userId === own.id) return { member: own, pending: false };
  const member = await findMember(em, caller.organizationId, userId, 'user_id');
  if (own.orgRole !== 'owner') {
    throw errors.permission(
      'member_binding_forbidden',
      'Only a key acting for an owner can create a key that acts for another member (user_id); that member then confirms it.',
      { user_id: member.id },
    );
  }
  return { member, pending: true };
}

/**
 * Confirms a key minted for `caller`'s member by someone else: only a key acting for that member, and
 * not one that comes from the minter (its provenance shares nothing with the pending key's minter),
 * can, since the minter has seen the pending key's secret and could confirm it with another key it made.
 */
export async function confirmApiKey(em: EntityManager, caller: Pick<AuthContext, 'organizationId' | 'environment' | 'apiKeyId' | 'memberId'>, id: string): Promise<ApiKey> {
  const key = await findOrganizationKey(em, caller, id);
  if (!key.pendingConfirmation) throw errors.conflict('api_key_not_pending', 'This key is not waiting for a confirmation.', { api_key_id: key.id });
  if (!key.member || caller.memberId !== key.member.id) {
    throw errors.permission('confirmation_forbidden', 'Only a key acting for the member this key acts for can confirm it.', { user_id: key.member?.id ?? null });
  }
  const minter = key.createdByKeyId ? await provenance(em, { keyId: key.createdByKeyId }) : new Set<Origin>();
  if (sharedOrigins(await provenance(em, { keyId: caller.apiKeyId }), minter).length) {
    throw errors.permission('confirmation_not_independent', "This key comes from the pending key's minter: confirm with a key of your own (one the operator CLI made, or one minted from it).", {
      api_key_id: key.id,
    });
  }
  Object.assign(key, { pendingConfirmation: false, confirmedAt: new Date(), confirmedByKeyId: caller.apiKeyId });
  return key;
}

/** A key of the caller's organization and environment (another environment's is 404 `resource_missing`, as every resource's). */
export async function findOrganizationKey(em: EntityManager, scope: { organizationId: string; environment: Environment }, id: string): Promise<ApiKey> {
  const key = await em.findOne(ApiKey, { id, organization: scope.organizationId, environment: scope.environment, revokedAt: null });
  if (!key) throw errors.notFound('api_key', id);
  return key;
}

export function presentApiKey(key: ApiKey, secret?: string) {
  return {
    id: key.id,
    object: 'api_key' as const,
    name: key.name,
    organization_id: key.organization.id,
    user_id: key.member?.id ?? null,
    status: key.revokedAt ? ('revoked' as const) : key.pendingConfirmation ? ('pending_confirmation' as const) : ('active' as const),
    environment: key.environment,
    scopes: key.scopes,
    api_version: key.apiVersion,
    redacted_secret: `sk_${key.environment === 'live' ? 'live' : 'test'}_...${key.secretLastFour}`,
    ...(secret ? { secret } : {}),
    created_at: iso(key.createdAt),
    ...(key.lastUsedAt ? { last_used_at: iso(key.lastUsedAt) } : {}),
    ...(key.revokedAt ? { revoked_at: iso(key.revokedAt) } : {}),
  };
}

/**
 * Keeps `last_used_at` current to within `resolutionMs` without a write per request: a key is
 * written at most once per window, by a conditional UPDATE that also holds across processes.
 */
export class LastUsedTracker {
  private readonly lastWritten = new Map<string, number>();

  constructor(private readonly resolutionMs: number) {}

  /** Returns the value the caller should report as last_used_at for this request. */
  touch(em: EntityManager, keyId: string, stored: Date | null | undefined, now = new Date()): Promise<Date> {
    const previous = Math.max(this.lastWritten.get(keyId) ?? 0, stored?.getTime() ?? 0);
    if (now.getTime() - previous < this.resolutionMs && previous > 0) return Promise.resolve(new Date(previous));
    this.lastWritten.set(keyId, now.getTime());
    return em
      .getConnection()
      .execute(
        `update api_keys set last_used_at = ? where id = ? and (last_used_at is null or last_used_at < ?)`,
        [now, keyId, new Date(now.getTime() - this.resolutionMs)],
        'run',
      )
      .then(() => now);
  }
}
