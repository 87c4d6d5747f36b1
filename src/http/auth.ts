import { ApiKey } from '../api-keys/entities';
import { hashSecret, SECRET_PATTERN } from '../api-keys/service';
import { ApiError, errors } from './errors';
import type { AppContext, AppDeps, AuthContext } from './context';

/** Resolves `Authorization: Bearer sk_...` to the calling key; 401 for anything else. */
export async function authenticate(ctx: AppContext, deps: AppDeps): Promise<AuthContext> {
  const header = ctx.get('authorization');
  if (!header) throw errors.unauthenticated('No API key provided. Send it as `Authorization: Bearer <secret>`.');
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  if (!match) throw errors.unauthenticated('Malformed Authorization header. Use `Authorization: Bearer <secret>`.');
  const secret = match[1]!;
  // The secret itself is never echoed: a mistyped key in a log is still a key.
  if (!SECRET_PATTERN.test(secret)) throw errors.unauthenticated('Invalid API key provided.');

  const em = deps.orm.em.fork();
  const key = await em.findOne(ApiKey, { secretHash: hashSecret(secret) }, { populate: ['member'] });
  if (!key || key.revokedAt) throw errors.unauthenticated('Invalid API key provided.');

  const lastUsedAt = await deps.lastUsed.touch(em, key.id, key.lastUsedAt);
  return {
    organizationId: key.organization.id,
    apiKeyId: key.id,
    memberId: key.member?.id ?? null,
    scopes: key.scopes,
    environment: key.environment,
    apiVersion: ctx.state.requestedApiVersion ?? key.apiVersion,
    lastUsedAt,
  };
}

/** Per-key token bucket; sets RateLimit-* on every authenticated response and refuses with 429. */
export function applyRateLimit(ctx: AppContext, deps: AppDeps, auth: AuthContext): void {
  const decision = deps.rateLimiter.take(auth.apiKeyId);
  ctx.set('RateLimit-Limit', String(decision.limit));
  ctx.set('RateLimit-Remaining', String(decision.remaining));
  ctx.set('RateLimit-Reset', String(decision.resetSeconds));
  if (!decision.allowed) {
    throw new ApiError({
      status: 429,
      type: 'rate_limit_error',
      code: 'rate_limited',
      message: `Too many requests for this API key. Retry after ${decision.resetSeconds} second(s).`,
      details: { retry_after_seconds: decision.resetSeconds },
      headers: { 'Retry-After': String(decision.resetSeconds) },
    });
  }
}
