import { randomUUID } from 'node:crypto';
import Koa from 'koa';
import { Counter, Histogram } from 'prom-client';
import { isApiVersion, LATEST_API_VERSION } from '../shared/api-versions';
import type { AppContext, AppDeps, AppState } from './context';
import { DomainError, errors } from '../shared/errors';
import { errorHeaders, httpStatus, toEnvelope } from './errors';
import { RouteRegistry } from './route';
import { isDatabaseUnavailable, isTransientConflict } from '../db/transient-errors';

/** A request that met the database down (restarting, failing over): retryable, and not the request's fault. */
const databaseUnavailable = () =>
  errors.unavailable('database_unavailable', 'The database is unavailable for the moment. Retry with the same Idempotency-Key.', 2);

/**
 * A request whose transaction lost a lock conflict on each attempt: rolled back, nothing done, safe to repeat. Answered
 * as Stripe answers its `lock_timeout` (429), which clients already retry after a pause.
 */
const transactionConflict = () =>
  new DomainError({
    kind: 'rate_limited',
    code: 'lock_timeout',
    message: 'Another request changed the same records at the same moment; nothing was done. Retry with the same Idempotency-Key.',
    details: { retry_after_seconds: 1 },
  });

export type RouteModule = (routes: RouteRegistry) => void;

/** The error to answer: a refusal once what it left to finish has finished (its audit entry), or that work's failure. */
async function settled(caught: unknown): Promise<unknown> {
  if (!(caught instanceof DomainError) || !caught.settling) return caught;
  try {
    await caught.settling;
    return caught;
  } catch (failure) {
    return failure;
  }
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the Koa app from the domain route modules; no I/O happens here. */
export function createApp(deps: AppDeps, modules: RouteModule[]): { app: Koa<AppState>; routes: RouteRegistry } {
  const app = new Koa<AppState>();
  // X-Forwarded-For names the client only behind the configured proxies (each appends one entry): unconfigured, any client could name its own address.
  app.proxy = deps.config.TRUST_PROXY > 0;
  app.maxIpsCount = deps.config.TRUST_PROXY;
  const routes = new RouteRegistry(deps);
  for (const register of modules) register(routes);

  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by method, route pattern and status',
    labelNames: ['method', 'route', 'status'],
    registers: [deps.metrics],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by method and route pattern',
    labelNames: ['method', 'route'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [deps.metrics],
  });

  // The access line's fields are the scalars built below, none named like a secret, so the logger's redaction
  // (whose wildcard paths run on every field of every line: about 4% of a read's CPU) could never censor one.
  const accessLog = deps.log.child({}, { redact: [] });
  // Every failure leaves in the contract's envelope; a 500 never shows a stack, SQL or secret.
  const answerError = (ctx: AppContext, caught: unknown) => {
    const known = caught instanceof DomainError ? caught : null;
    const databaseDown = !known && isDatabaseUnavailable(caught);
    // Lost a deadlock or serialization conflict on every attempt (src/http/route.ts): rolled back, nothing done.
    const conflicted = !known && !databaseDown && isTransientConflict(caught);
    if (databaseDown || conflicted) deps.log.warn({ request_id: ctx.state.requestId, err: caught }, databaseDown ? 'database unavailable' : 'transaction conflict');
    else if (!known) deps.log.error({ request_id: ctx.state.requestId, err: caught }, 'unhandled error');
    const error = known ?? (databaseDown ? databaseUnavailable() : conflicted ? transactionConflict() : errors.internal());
    ctx.status = httpStatus(error);
    for (const [name, value] of Object.entries(errorHeaders(error))) ctx.set(name, value);
    ctx.body = toEnvelope(error, ctx.state.requestId);
  };

  // One middleware before the router, in this order: request id, access log and metrics around everything (errors
  // included); the error envelope around the rest; the NUL and Api-Version checks; after the router, the unmatched
  // route or method. One function rather than five: each layer cost every request a closure and a few promises.
  app.use(async (ctx: AppContext, next) => {
    const started = process.hrtime.bigint();
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = REQUEST_ID_PATTERN.test(incoming) ? incoming : `req_${randomUUID().replace(/-/g, '')}`;
    ctx.set('X-Request-Id', ctx.state.requestId);
    try {
      rejectNul(ctx);
      acceptApiVersion(ctx);
      await next();
      rejectUnmatched(ctx);
    } catch (caught) {
      answerError(ctx, await settled(caught));
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const route = ctx.state.routePattern ?? 'unmatched';
    requests.inc({ method: ctx.method, route, status: String(ctx.status) });
    duration.observe({ method: ctx.method, route }, seconds);
    // The request id as a field of the line, not through a child logger: no logger is built per request.
    accessLog.info(
      {
        request_id: ctx.state.requestId,
        method: ctx.method,
        route,
        path: ctx.path,
        status: ctx.status,
        duration_ms: Math.round(seconds * 1000),
        organization_id: ctx.state.auth?.organizationId,
        api_key_id: ctx.state.auth?.apiKeyId,
      },
      'request',
    );
  });

  // Dispatches, then sets 405 (or 501 for unknown verbs) and the Allow header; the middleware above words the error.
  app.use(routes.middleware());

  return { app, routes };
}

/** A NUL character (%00) in the path or query can reach no stored record (PostgreSQL text refuses it). */
function rejectNul(ctx: AppContext): void {
  if (!/%00/.test(ctx.url) && !ctx.url.includes('\u0000')) return;
  const inQuery = /%00|\u0000/.test(ctx.querystring);
  throw errors.validation(`Invalid ${inQuery ? 'query' : 'path'}: the NUL character (%00) is not allowed.`, inQuery ? 'query' : 'path');
}

/** Api-Version: validated before anything else; echoed on every response (the key's own version replaces the default once it is known). */
function acceptApiVersion(ctx: AppContext): void {
  const requested = ctx.get('api-version');
  if (requested && !isApiVersion(requested)) {
    ctx.set('Api-Version', LATEST_API_VERSION);
    throw new DomainError({
      kind: 'invalid',
      code: 'invalid_api_version',
      message: `Unknown Api-Version '${requested.slice(0, 40)}'. Known versions: 2026-01-30, 2026-02-28, 2026-05-15.`,
      param: 'Api-Version',
    });
  }
  if (requested) ctx.state.requestedApiVersion = requested;
  ctx.set('Api-Version', requested || LATEST_API_VERSION);
}

/** Unmatched routes and methods, after the router and its allowed-methods check have run. */
function rejectUnmatched(ctx: AppContext): void {
  if (ctx.body !== undefined) return;
  if (ctx.status === 405 || ctx.status === 501) {
    throw new DomainError({
      kind: 'method_not_allowed',
      code: 'method_not_allowed',
      message: `${ctx.method} is not allowed on ${ctx.path}; allowed: ${ctx.response.get('Allow')}.`,
    });
  }
  if (ctx.status === 404) {
    throw new DomainError({
      kind: 'not_found',
      code: 'unknown_route',
      message: `Unrecognized request URL (${ctx.method}: ${ctx.path}).`,
    });
  }
}
