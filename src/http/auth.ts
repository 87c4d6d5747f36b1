import type { KeyRow } from '../api-keys/key-cache';
import { hashSecret, SECRET_PATTERN } from '../api-keys/service';
import { DomainError, errors } from '../shared/errors';
import type { AppContext, AppDeps, AuthContext } from './context';

/** Resolves `Authorization: Bearer sk_...` to the calling key; 401 for anything else. */
export async function authenticate(ctx: AppContext, deps: AppDeps): Promise<AuthContext> {
  const client = `address:${ctx.ip}`;
  if (deps.authFailureLimiter.hasToken(client)) {
    try {
      return await lookUpKey(ctx, deps);
    } catch (error) {
      deps.authFailureLimiter.take(client);
      throw error;
    }
  }
  // An address past its budget of bad keys may still carry a valid one (a NAT, a shared proxy): every key is still
  // looked up, but one at a time per address, so bogus ones hold at most one connection; a bad key is then 429.
  return deps.throttledLookups.run(client, async () => {
    try {
      return await lookUpKey(ctx, deps);
    } catch (error) {
      if (!(error instanceof DomainError) || error.kind !== 'unauthenticated') throw error;
      throw new DomainError({
        kind: 'rate_limited',
        code: 'rate_limited',
        message: 'Too many requests with missing or invalid API keys from this address. Retry later with a valid key.',
        details: { retry_after_seconds: deps.authFailureLimiter.take(client).resetSeconds },
      });
    }
  });
}

async function lookUpKey(ctx: AppContext, deps: AppDeps): Promise<AuthContext> {
  const header = ctx.get('authorization');
  if (!header) throw errors.unauthenticated('No API key provided. Send it as `Authorization: Bearer <secret>`.');
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  if (!match) throw errors.unauthenticated('Malformed Authorization header. Use `Authorization: Bearer <secret>`.');
  const secret = match[1]!;
  // The secret itself is never echoed: a mistyped key in a log is still a key.
  if (!SECRET_PATTERN.test(secret)) throw errors.unauthenticated('Invalid API key provided.');

  const secretHash = hashSecret(secret);
  const key = deps.keyCache.get(secretHash) ?? (await readKey(deps, secretHash));
  if (!key) throw errors.unauthenticated('Invalid API key provided.');
  if (key.pending_confirmation) {
    throw errors.permission('api_key_pending_confirmation', 'This key acts for a member who has not confirmed it yet: a key acting for that member confirms it with POST /v1/api-keys/:id/confirm.', {
      api_key_id: key.id,
    });
  }

  const lastUsedAt = await deps.lastUsed.touch(deps.orm.em, key.id, key.last_used_at ? new Date(key.last_used_at) : null);
  return {
    organizationId: key.organization_id,
    apiKeyId: key.id,
    memberId: key.member_id,
    scopes: key.scopes,
    environment: key.environment,
    apiVersion: ctx.state.requestedApiVersion ?? key.api_version,
    lastUsedAt,
  };
}

/** One indexed row, read without entity hydration, and cached unless a change to keys raced the read. */
async function readKey(deps: AppDeps, secretHash: string): Promise<KeyRow | undefined> {
  const generation = deps.keyCache.currentGeneration();
  const [key] = await deps.orm.em.getConnection().execute<KeyRow[]>(
    `select id, organization_id, member_id, scopes, environment, api_version, pending_confirmation, last_used_at
       from api_keys where secret_hash = ? and revoked_at is null`,
    [secretHash],
  );
  if (key) deps.keyCache.set(secretHash, key, generation);
  return key;
}

/** Per-key token bucket shared by every API process; sets RateLimit-* on every authenticated response and refuses with 429. */
export async function applyRateLimit(ctx: AppContext, deps: AppDeps, auth: AuthContext): Promise<void> {
  const decision = await deps.rateLimiter.take(deps.orm.em, auth.apiKeyId);
  ctx.set('RateLimit-Limit', String(decision.limit));
  ctx.set('RateLimit-Remaining', String(decision.remaining));
  ctx.set('RateLimit-Reset', String(decision.resetSeconds));
  if (!decision.allowed) {
    throw new DomainError({
      kind: 'rate_limited',
      code: 'rate_limited',
      message: `Too many requests for this API key. Retry after ${decision.resetSeconds} second(s).`,
      details: { retry_after_seconds: decision.resetSeconds },
    });
  }
}
