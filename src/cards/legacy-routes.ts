import type { AppContext } from '../http/context';
import type { RouteRegistry } from '../http/route';
import { DomainError } from '../shared/errors';
import { ErrorEnvelope } from '../shared/schemas';
import { CARD_TAG, CardIdParams } from './schemas';

/** The routes Virtual Cards v2 removed: every /api/virtualcards request answers 410, naming its replacement. */

/** The v1 /api/virtualcards/* routes: 410 Gone, naming the replacement. */
const LEGACY_ROUTES = [
  { method: 'post', path: '/api/virtualcards', successor: 'POST /api/cards' },
  { method: 'get', path: '/api/virtualcards', successor: 'GET /api/cards' },
  { method: 'get', path: '/api/virtualcards/:cardId', successor: 'GET /api/cards/:cardId' },
  { method: 'get', path: '/api/virtualcards/:cardId/details', successor: 'GET /api/cards/:cardId/secure' },
  { method: 'post', path: '/api/virtualcards/:cardId/topup', successor: 'POST /api/cards/:cardId/balance (type fund)' },
  { method: 'post', path: '/api/virtualcards/:cardId/withdraw', successor: 'POST /api/cards/:cardId/balance (type withdraw)' },
  { method: 'post', path: '/api/virtualcards/:cardId/freeze', successor: 'POST /api/cards/:cardId/status (status frozen)' },
  { method: 'post', path: '/api/virtualcards/:cardId/unfreeze', successor: 'POST /api/cards/:cardId/status (status active)' },
  { method: 'post', path: '/api/virtualcards/:cardId/terminate', successor: 'DELETE /api/cards/:cardId' },
  { method: 'post', path: '/api/virtualcards/:cardId/spending-limits', successor: 'PUT /api/cards/:cardId/spend-limits' },
] as const;

/** What an unknown path under /api/virtualcards is pointed to. */
const LEGACY_FALLBACK_SUCCESSOR = 'POST /api/cards (create) or GET /api/cards (list)';

/** Every method on every path under /api/virtualcards (the bare prefix included). */
const LEGACY_CATCH_ALL = '/api/virtualcards{/*rest}';

const legacyPattern = (path: string) => new RegExp(`^${path.replace(/:[A-Za-z]+/g, '[^/]+')}/?$`, 'i');
const LEGACY_PATTERNS = LEGACY_ROUTES.map((legacy) => ({ ...legacy, pattern: legacyPattern(legacy.path) }));

/**
 * The replacement of a legacy request: the route's own successor; for another method on a known
 * path, that path's successors; for any other path, the card routes.
 */
function legacySuccessor(method: string, path: string): string {
  const samePath = LEGACY_PATTERNS.filter((legacy) => legacy.pattern.test(path));
  const exact = samePath.find((legacy) => legacy.method === method.toLowerCase());
  if (exact) return exact.successor;
  if (samePath.length > 0) return samePath.map((legacy) => legacy.successor).join(' or ');
  return LEGACY_FALLBACK_SUCCESSOR;
}

const removed = (successor: string) =>
  new DomainError({
    kind: 'gone',
    code: 'endpoint_removed',
    message: `This endpoint was removed with Virtual Cards v2; use ${successor}.`,
    details: { successor },
  });

/**
 * The catch-all answers every legacy request before anything reads its body or key, so any method
 * on any path under /api/virtualcards is 410 (never 405, 400 or 415); the named routes after it
 * document the known ones in the OpenAPI document and answer the same.
 */
export function registerLegacyRoutes(routes: RouteRegistry): void {
  routes.routerFor(LEGACY_CATCH_ALL).all(LEGACY_CATCH_ALL, async (ctx: AppContext) => {
    ctx.state.routePattern = LEGACY_CATCH_ALL;
    throw removed(legacySuccessor(ctx.method, ctx.path));
  });
  for (const legacy of LEGACY_ROUTES) {
    routes.add({
      method: legacy.method,
      path: legacy.path,
      operationId: `legacy_${legacy.method}_${legacy.path.replace(/[^a-z]+/gi, '_')}`,
      summary: `Removed (Virtual Cards v2, 30 January 2026): use ${legacy.successor}`,
      description: `Removed (Virtual Cards v2, 30 January 2026): use ${legacy.successor}. Every method on every path under /api/virtualcards answers 410 naming its replacement.`,
      tag: CARD_TAG,
      deprecated: true,
      scope: 'public',
      ...(legacy.path.includes(':cardId') ? { params: CardIdParams } : {}),
      // No body is documented: the route answers 410 before reading one, whatever is sent.
      response: { status: 410, description: 'Gone: the error envelope naming the replacement in details.successor', schema: ErrorEnvelope },
      handler: async () => {
        throw removed(legacy.successor);
      },
    });
  }
}
