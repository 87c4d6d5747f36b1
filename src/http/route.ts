import Router from '@koa/router';
import type Koa from 'koa';
import { OpenAPIRegistry, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ZodType } from 'zod';
import { grants, type Scope } from '../api-keys/scopes';
import { ErrorEnvelope, z } from '../shared/schemas';
import { applyRateLimit, authenticate } from './auth';
import { readJsonBody, readJsonBodyText } from './body';
import type { AppContext, AppDeps, AppState, AuthContext } from './context';
import { DomainError, errors } from '../shared/errors';
import { keyCustodyIsWeak, keyCustodyUnconfigured } from '../keys/custody';
import { PublicKeysMissing } from '../keys/public-keys';
import { fromZodError, httpStatus, toEnvelope } from './errors';
import { describeIssue } from '../shared/validation-messages';
import { jsonResponse, type StoredResponse } from '../idempotency/service';
import { retryingTransientConflicts } from '../db/transient-errors';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type RequiredScope = Scope | readonly Scope[] | 'authenticated';

export interface HandlerResult {
  status?: number;
  body: unknown;
  /** Non-JSON responses (metrics, docs) name their content type. */
  contentType?: string;
  headers?: Record<string, string>;
}

interface HandlerInput<P, Q, B, A> {
  params: P;
  query: Q;
  body: B;
  /** The unparsed body text, for routes with `rawJsonBody`; otherwise undefined. */
  rawBody: string | undefined;
  auth: A;
  /** Request-scoped EntityManager; inside a transaction for every method but GET, where it is forked on first use. */
  em: EntityManager;
  ctx: AppContext;
  deps: AppDeps;
}

interface RouteBase<P extends ZodType, Q extends ZodType, B extends ZodType> {
  method: Method;
  /** Koa-style path with `:param` segments. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  params?: P;
  query?: Q;
  body?: B;
  /** The success response, described for OpenAPI; a body served in several content types names each. */
  response: { status: number; description: string; schema?: ZodType; contentType?: string | readonly string[] };
  /** Other statuses this route answers besides those every route of its kind documents (CommonErrors, or 400 for public routes). */
  otherResponses?: { status: number; description: string; schema: ZodType }[];
  deprecated?: boolean;
  /**
   * The webhook deliveries the handler recorded are fired after the commit without being awaited (as
   * activities fire theirs): a caller on a deadline (Stripe's 2-second authorization decision) is
   * answered whatever Temporal does. What does not start is on its row for the start sweep.
   */
  detachDeliveries?: boolean;
  /**
   * The handler gets the body as unparsed text (`rawBody`) after the transport checks (415, 413),
   * and parses and validates it itself: for a protocol that answers malformed JSON in its own
   * format rather than in the REST envelope, or a webhook whose signature covers the exact bytes.
   * `documentedAs` describes the body for OpenAPI.
   */
  rawJsonBody?: { documentedAs: ZodType };
  /**
   * The handler opens its own transactions (`deps.starter.transaction`), so it can wait on the
   * workflow it started once they have committed, holding no transaction or lock meanwhile; or it
   * only reads, a node among others, holding no transaction while the node answers; or it bounds
   * the wait for a pooled connection itself (Stripe's authorization decision).
   */
  ownTransactions?: boolean;
}

export interface AuthenticatedRoute<P extends ZodType, Q extends ZodType, B extends ZodType, R = undefined> extends RouteBase<P, Q, B> {
  /** The scope the key must hold (any one of a list); `authenticated` admits any valid key. */
  scope: RequiredScope;
  /** Sandbox helpers: a live key gets 404, as if the route did not exist. */
  sandboxOnly?: boolean;
  /**
   * What the handler needs from outside the database (a chain node's fee market, gas estimates),
   * read before its transaction opens (and after an Idempotency-Key replay is ruled out), so no pooled
   * connection or row lock waits on the network. Its `em` is outside any transaction; the handler
   * gets the answer as `prepared`. A refusal here is the request's outcome, as the handler's would be.
   */
  prepare?: (input: HandlerInput<z.infer<P>, z.infer<Q>, z.infer<B>, AuthContext>) => Promise<R>;
  handler: (input: HandlerInput<z.infer<P>, z.infer<Q>, z.infer<B>, AuthContext> & { prepared: R }) => Promise<HandlerResult>;
}

export interface PublicRoute<P extends ZodType, Q extends ZodType, B extends ZodType> extends RouteBase<P, Q, B> {
  scope: 'public';
  handler: (input: HandlerInput<z.infer<P>, z.infer<Q>, z.infer<B>, undefined>) => Promise<HandlerResult>;
}

const NoInput = z.object({}).strict();
/** What every authenticated route may answer besides its success (docs/api.md shows a route's own first). */
export const CommonErrors: Record<number, string> = {
  400: 'Invalid request (validation_failed, invalid_json, invalid_api_version...)',
  401: 'Missing, unknown or revoked API key',
  403: 'The key lacks the required scope',
  404: 'No such resource in this organization',
  409: 'Conflict (state or idempotency)',
  429: 'Rate limited',
  500: 'Internal error',
  503: 'A dependency is unavailable; every live key while key custody is weak (key_custody_unconfigured)',
};

export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/** How many times a transaction runs again after the signer stored public keys it needed (withPublicKeys). */
const PUBLIC_KEY_ROUNDS = 5;

/**
 * The one way to add a route: it registers the Koa handler and its OpenAPI operation from the
 * same zod schemas, so the document cannot drift from what is validated. Authentication, scope,
 * rate limiting, validation, transactions and Idempotency-Key handling happen here once.
 */
export class RouteRegistry {
  /**
   * One router per first two path segments (`/v1/wallets`, `/api/cards`, `/healthz`): a request runs only
   * the router of its own, since a router tests every route it holds in turn (with 127 routes in one, that
   * matching was about 4% of a read's CPU). No route has a parameter in its first two segments (routerFor).
   */
  private readonly routers = new Map<string, Router<AppState>>();
  readonly openapi = new OpenAPIRegistry();
  readonly operations: { method: Method; path: string }[] = [];

  constructor(private readonly deps: AppDeps) {
    this.openapi.register('Error', ErrorEnvelope);
    this.openapi.registerComponent('securitySchemes', 'bearerAuth', {
      type: 'http',
      scheme: 'bearer',
      description: 'An API secret, `sk_test_...` (sandbox) or `sk_live_...` (live).',
    });
  }

  add<P extends ZodType = typeof NoInput, Q extends ZodType = typeof NoInput, B extends ZodType = typeof NoInput, R = undefined>(
    route: AuthenticatedRoute<P, Q, B, R>,
  ): void;
  add<P extends ZodType = typeof NoInput, Q extends ZodType = typeof NoInput, B extends ZodType = typeof NoInput>(route: PublicRoute<P, Q, B>): void;
  add<P extends ZodType, Q extends ZodType, B extends ZodType>(route: AuthenticatedRoute<P, Q, B, unknown> | PublicRoute<P, Q, B>): void {
    this.registerOpenApi(route);
    this.operations.push({ method: route.method, path: route.path });
    this.routerFor(route.path)[route.method](route.path, async (ctx: AppContext) => {
      ctx.state.routePattern = route.path;
      const auth = route.scope === 'public' ? undefined : await this.authorize(ctx, route.scope, (route as AuthenticatedRoute<P, Q, B>).sandboxOnly ?? false);
      const params = parse(route.params ?? NoInput, ctx.params ?? {}, 'path');
      const query = parse(route.query ?? NoInput, ctx.query, 'query');
      const takesRawBody = route.rawJsonBody !== undefined;
      const rawText = takesRawBody ? await readJsonBodyText(ctx, this.deps.config.BODY_LIMIT_BYTES) : undefined;
      // What Idempotency-Key hashes: the parsed body, or the text itself for a raw-body route.
      const rawBody = takesRawBody ? rawText : route.method === 'get' ? undefined : await readJsonBody(ctx, this.deps.config.BODY_LIMIT_BYTES);
      const body = route.body ? parse(route.body, rawBody === undefined ? {} : rawBody, 'body') : takesRawBody ? ({} as never) : rejectUnexpectedBody(rawBody);
      type Input = HandlerInput<unknown, unknown, unknown, AuthContext | undefined>;
      const handler = route.handler as (input: Input & { prepared: unknown }) => Promise<HandlerResult>;
      // Built whole, never spread: spreading would call the `em` getter, forking for every GET.
      const input = (em: () => EntityManager, prepared?: unknown): Input & { prepared: unknown } => ({
        params, query, body, rawBody: rawText, auth, get em() { return em(); }, ctx, deps: this.deps, prepared,
      });
      const preparer = route.scope === 'public' ? undefined : ((route as AuthenticatedRoute<P, Q, B, unknown>).prepare as ((input: Input) => Promise<unknown>) | undefined);
      let prepared: unknown;
      const prepare = async (em: EntityManager) => {
        if (preparer) prepared = await preparer(input(() => em));
      };
      const handle = (em: () => EntityManager) => handler(input(em, prepared));
      let transaction: EntityManager | undefined;
      const run = (transactionEm: EntityManager) => {
        transaction = transactionEm;
        return handle(() => transactionEm);
      };

      let result: HandlerResult;
      const idempotencyKey = ctx.get(IDEMPOTENCY_KEY_HEADER);
      const ownTransactions = route.ownTransactions === true;
      if (route.method === 'get') {
        // Forked on first use: a read of detached rows through the process's EntityManager (src/db/lean.ts) needs no fork.
        let forked: EntityManager | undefined;
        result = await handle(() => (forked ??= this.deps.orm.em.fork()));
      } else {
        const em = this.deps.orm.em.fork();
        if (auth && idempotencyKey && route.method === 'post') {
          result = await this.runIdempotently(ctx, em, auth, idempotencyKey, rawBody, route.response.status, ownTransactions, prepare, run);
        } else {
          await prepare(em);
          result = ownTransactions ? await run(em) : await this.withPublicKeys(() => retryingTransientConflicts(() => em.transactional(run)));
        }
      }
      // Committed: fire the workflow starts the handler recorded (deliveries included).
      if (transaction && route.method !== 'get' && !ownTransactions) await this.deps.starter.fireRecorded(this.deps.orm.em, transaction, { detachDeliveries: route.detachDeliveries ?? false });
      respond(ctx, result, route.response.status);
    });
  }

  /** The router of the paths `path` matches; a path whose first two segments are not literal is refused at startup. */
  routerFor(path: string): Router<AppState> {
    // An optional part must be whole segments (`/api/virtualcards{/*rest}`): what precedes it is literal.
    const literal = path.split('{/')[0]!;
    const [first = '', second = ''] = literal.split('/').slice(1);
    if (![first, second].every((segment) => /^[A-Za-z0-9._~-]*$/.test(segment))) throw new Error(`route ${path}: its first two path segments must be literal`);
    const key = routerKey(literal);
    let router = this.routers.get(key);
    if (!router) this.routers.set(key, (router = new Router<AppState>()));
    return router;
  }

  /**
   * The routes as one Koa middleware: the request's router dispatches and then sets 405 (or 501 for an
   * unknown verb) with the Allow header, as `router.routes()` and `router.allowedMethods()` do; a path no
   * router serves goes through an empty one, which answers an unknown verb 501 as well.
   */
  middleware(): Koa.Middleware<AppState, AppContext> {
    const chain = (router: Router<AppState>): Koa.Middleware<AppState, AppContext> => {
      const routes = router.routes() as unknown as Koa.Middleware<AppState, AppContext>;
      const allowedMethods = router.allowedMethods() as unknown as Koa.Middleware<AppState, AppContext>;
      return (ctx, next) => routes(ctx, () => allowedMethods(ctx, next));
    };
    const dispatchers = new Map([...this.routers].map(([key, router]) => [key, chain(router)]));
    const unserved = chain(new Router<AppState>());
    return (ctx, next) => (dispatchers.get(routerKey(ctx.path)) ?? unserved)(ctx, next);
  }

  private async authorize(ctx: AppContext, scope: RequiredScope, sandboxOnly: boolean): Promise<AuthContext> {
    const auth = await authenticate(ctx, this.deps);
    ctx.state.auth = auth;
    ctx.set('Api-Version', auth.apiVersion);
    if (auth.environment === 'live' && keyCustodyIsWeak(this.deps.keys.provider)) throw keyCustodyUnconfigured();
    await applyRateLimit(ctx, this.deps, auth);
    if (sandboxOnly && auth.environment !== 'sandbox') {
      throw new DomainError({
        kind: 'not_found',
        code: 'unknown_route',
        message: `Unrecognized request URL (${ctx.method}: ${ctx.path}). Sandbox helpers answer sk_test_ keys only.`,
      });
    }
    if (scope === 'authenticated') return auth;
    const anyOf: readonly Scope[] = typeof scope === 'string' ? [scope] : scope;
    if (!anyOf.some((candidate) => grants(auth.scopes, candidate))) throw errors.insufficientScope(anyOf[0]!, anyOf);
    return auth;
  }

  /**
   * Runs a handler's transaction; when a derivation in it needed public keys that are not stored yet
   * (an API holding no seed key, a wallet's first address), the transaction has rolled back: the signer
   * stores them (the worker, src/custody/signer.ts) and the transaction runs again. A few rounds at most:
   * concurrent wallets of one organization may each move the next account on.
   */
  private async withPublicKeys<T>(work: () => Promise<T>): Promise<T> {
    for (let round = 1; ; round += 1) {
      try {
        return await work();
      } catch (error) {
        if (!(error instanceof PublicKeysMissing)) throw error;
        if (round >= PUBLIC_KEY_ROUNDS) throw errors.unavailable('signer_busy', 'The signer derived keys for this request several times while other requests took them. Retry.', 1);
        await this.deps.signer.storePublicKeys(error.request);
      }
    }
  }

  private async runIdempotently(
    ctx: AppContext,
    em: EntityManager,
    auth: AuthContext,
    key: string,
    rawBody: unknown,
    defaultStatus: number,
    ownTransactions: boolean,
    prepare: (em: EntityManager) => Promise<void>,
    run: (em: EntityManager) => Promise<HandlerResult>,
  ): Promise<HandlerResult> {
    if (key.length > 255) throw errors.validation('Idempotency-Key must be at most 255 characters.', 'Idempotency-Key');
    const idempotency = this.deps.idempotency;
    const claim = await idempotency.claim(em, {
      organizationId: auth.organizationId,
      environment: auth.environment,
      key,
      method: ctx.method,
      path: ctx.path,
      body: rawBody,
    });
    if (claim.kind === 'replay') {
      ctx.set('Idempotent-Replayed', 'true');
      return { status: claim.status, body: claim.body, contentType: claim.contentType };
    }
    // The body is serialized once: the text sent is the text stored, so a replay matches it byte for byte.
    const sent = (result: HandlerResult, response: StoredResponse): HandlerResult => ({ ...result, status: response.status, body: response.body, contentType: response.contentType });
    try {
      await prepare(em);
      if (ownTransactions) {
        // The handler commits its own transactions, so its response is stored after them, unfenced: a
        // crash in between leaves the claim in flight, and a retry after the lock timeout runs the
        // handler again. Such handlers are state transitions (terminate, pay, vote) that answer a
        // repeat from the state, so the guarantee is one outcome, not one execution.
        const result = await run(em);
        const response = storedResponse(result, defaultStatus);
        await idempotency.tryComplete(em, claim, response);
        return sent(result, response);
      }
      return await this.withPublicKeys(() =>
        retryingTransientConflicts(() =>
          em.transactional(async (tx) => {
            const result = await run(tx);
            const response = storedResponse(result, defaultStatus);
            // Fenced: a claim taken over meanwhile makes this throw, rolling back this handler's work.
            await idempotency.complete(tx, claim, response);
            return sent(result, response);
          }),
        ),
      );
    } catch (error) {
      // A 429 from the handler (too much in flight) says "not now", not an outcome: the retry runs afresh. So does a send
      // held for approval: once approved, the same request with the same key is what passes (policies/held-sends.ts).
      if (error instanceof DomainError && httpStatus(error) < 500 && error.kind !== 'rate_limited' && error.code !== 'policy_approval_required') {
        // The change rolled back; the refusal itself is the stored outcome, as Stripe does (unless the claim is no longer ours).
        // The error middleware sends the same envelope, serialized the same way.
        await idempotency.tryComplete(em, claim, jsonResponse(httpStatus(error), toEnvelope(error, ctx.state.requestId)));
      } else {
        // May follow a commit-phase error of a transaction that did commit: release leaves a completed claim alone.
        await idempotency.release(em, claim);
      }
      throw error;
    }
  }

  private registerOpenApi<P extends ZodType, Q extends ZodType, B extends ZodType>(
    route: RouteBase<P, Q, B> & { scope: RequiredScope | 'public' },
  ) {
    const bodySchema = route.body ?? route.rawJsonBody?.documentedAs;
    const { schema, contentType = 'application/json' } = route.response;
    const responses: RouteConfig['responses'] = {
      [route.response.status]: {
        description: route.response.description,
        ...(schema ? { content: Object.fromEntries([contentType].flat().map((type) => [type, { schema }])) } : {}),
      },
    };
    // Every route validates its path, query and body (a public one too: unknown query parameters are refused).
    const errorStatuses = route.scope === 'public' ? { 400: CommonErrors[400]! } : CommonErrors;
    for (const [status, description] of Object.entries(errorStatuses)) {
      responses[status] = { description, content: { 'application/json': { schema: ErrorEnvelope } } };
    }
    for (const other of route.otherResponses ?? []) {
      responses[other.status] = { description: other.description, content: { 'application/json': { schema: other.schema } } };
    }
    const headers =
      route.method === 'post' && route.scope !== 'public'
        ? z.object({
            'Idempotency-Key': z
              .string()
              .max(255)
              .optional()
              .openapi({ description: 'Replays the stored response (same status, Content-Type and body bytes) for 24 h; scoped to the organization and the key\'s environment' }),
          })
        : undefined;
    this.openapi.registerPath({
      method: route.method,
      path: route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}'),
      operationId: route.operationId,
      summary: route.summary,
      description: route.scope === 'public' ? route.description : `${route.description ?? route.summary}\n\nRequired scope: ${describeScope(route.scope)}.`,
      tags: [route.tag],
      deprecated: route.deprecated,
      security: route.scope === 'public' ? [] : [{ bearerAuth: [] }],
      request: {
        ...(route.params ? { params: route.params as never } : {}),
        ...(route.query ? { query: route.query as never } : {}),
        ...(headers ? { headers } : {}),
        // A body whose fields are all optional (a PATCH) may be left out: the route reads it as {}.
        ...(bodySchema
          ? { body: { content: { 'application/json': { schema: bodySchema } }, required: !(route.body?.safeParse({}).success ?? false) } }
          : {}),
      },
      responses,
    });
  }
}

/** A path's first two segments, lower-cased as route matching is case-insensitive; a trailing slash adds none. */
function routerKey(path: string): string {
  const [first = '', second = ''] = path.toLowerCase().split('/', 3).slice(1);
  return `${first}/${second}`;
}

function describeScope(scope: RequiredScope): string {
  if (scope === 'authenticated') return 'any valid key';
  return (typeof scope === 'string' ? [scope] : scope).map((name) => `\`${name}\``).join(' or ');
}

function parse<T extends ZodType>(schema: T, value: unknown, location: 'body' | 'query' | 'path'): z.infer<T> {
  const result = schema.safeParse(value, { error: describeIssue });
  if (!result.success) throw fromZodError(result.error, location);
  return result.data;
}

function rejectUnexpectedBody(rawBody: unknown): never {
  if (rawBody !== undefined && !(typeof rawBody === 'object' && rawBody !== null && Object.keys(rawBody).length === 0)) {
    throw errors.validation('This endpoint takes no request body.', 'body');
  }
  return {} as never;
}

/** What an idempotent request sends and stores: JSON serialized once, or the handler's own text. */
function storedResponse(result: HandlerResult, defaultStatus: number): StoredResponse {
  const status = result.status ?? defaultStatus;
  if (typeof result.body === 'string') return { status, contentType: result.contentType ?? 'text/plain', body: result.body };
  return { ...jsonResponse(status, result.body), ...(result.contentType ? { contentType: result.contentType } : {}) };
}

function respond(ctx: AppContext, result: HandlerResult, defaultStatus: number): void {
  ctx.status = result.status ?? defaultStatus;
  for (const [name, value] of Object.entries(result.headers ?? {})) ctx.set(name, value);
  if (result.contentType) ctx.type = result.contentType;
  ctx.body = result.body;
}
