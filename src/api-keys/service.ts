import { createHash, randomInt } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { errors } from '../shared/errors';
import { Member, Organization } from '../organizations/entities';
import { LATEST_API_VERSION } from '../shared/api-versions';
import { iso } from '../shared/time';
import { ApiKey, type Environment } from './entities';

const SECRET_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `sk_test_<32 base62 chars>` (about 190 bits), Stripe's shape; sandbox keys are `sk_test_`, live keys `sk_live_`. */
export function generateSecret(environment: Environment): string {
  let body = '';
  for (let i = 0; i < 32; i += 1) body += SECRET_ALPHABET[randomInt(SECRET_ALPHABET.length)];
  return `sk_${environment === 'live' ? 'live' : 'test'}_${body}`;
}

export const hashSecret = (secret: string): string => createHash('sha256').update(secret).digest('hex');

export const SECRET_PATTERN = /^sk_(test|live)_[0-9A-Za-z]{32}$/;

export interface NewApiKey {
  organization: Organization;
  name: string;
  scopes: string[];
  environment: Environment;
  apiVersion?: string;
  member?: Member | null;
  /** The calling key and the member it acts for; absent for the operator (CLI). */
  createdBy?: { apiKeyId: string; memberId: string | null };
}

/** Creates a key; the plaintext secret exists only in the return value, never in the database. */
export function createApiKey(em: EntityManager, input: NewApiKey): { key: ApiKey; secret: string } {
  const secret = generateSecret(input.environment);
  const key = em.create(ApiKey, {
    organization: input.organization,
    member: input.member ?? null,
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
 * Acting for a member is a privilege: a key bound to a member (user_id) can only be minted by a key
 * bound to that same member, or by a key bound to an owner. An unbound key, whatever its scopes,
 * never mints one (the operator's CLI can). See docs/policies.md.
 */
export async function assertMayActFor(em: EntityManager, caller: { organizationId: string; memberId: string | null }, member: Member): Promise<void> {
  if (caller.memberId === member.id) return;
  const acting = caller.memberId ? await em.findOne(Member, { id: caller.memberId, organization: caller.organizationId }) : null;
  if (acting?.orgRole === 'owner') return;
  throw errors.permission(
    'member_binding_forbidden',
    'Only a key acting for this member, or a key acting for an owner, can create a key that acts for a member (user_id).',
    { user_id: member.id },
  );
}

export async function findOrganizationKey(em: EntityManager, organizationId: string, id: string): Promise<ApiKey> {
  const key = await em.findOne(ApiKey, { id, organization: organizationId, revokedAt: null });
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
