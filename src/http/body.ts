import getRawBody from 'raw-body';
import { DomainError, errors } from '../shared/errors';
import type { AppContext } from './context';

/**
 * Reads a JSON body: JSON only (415), at most `limit` bytes (413), well-formed (400 invalid_json).
 * An empty body is `undefined`, so routes without a body accept bare POSTs.
 */
export async function readJsonBody(ctx: AppContext, limit: number): Promise<unknown> {
  const raw = await readJsonBodyText(ctx, limit);
  if (raw === undefined || raw.trim() === '') return undefined;
  let body: unknown;
  try {
    body = JSON.parse(raw) as unknown;
  } catch (error) {
    throw new DomainError({
      kind: 'invalid',
      code: 'invalid_json',
      message: `The request body is not valid JSON: ${(error as Error).message}`,
    });
  }
  const nul = pathOfNulCharacter(body);
  if (nul !== null) throw errors.validation(`Invalid ${nul || 'body'}: strings must not contain the NUL character (\\u0000).`, nul || 'body');
  return body;
}

/**
 * The body's text, unparsed, after the transport checks (415, 413): for a protocol that answers
 * malformed JSON in its own format (JSON-RPC). `undefined` when there is no body.
 */
export async function readJsonBodyText(ctx: AppContext, limit: number): Promise<string | undefined> {
  const length = ctx.request.length;
  const chunked = ctx.get('transfer-encoding') !== '';
  if (!chunked && !length) return undefined;
  if (!ctx.is('application/json', 'application/*+json')) {
    throw new DomainError({
      kind: 'unsupported_media_type',
      code: 'unsupported_media_type',
      message: `Request bodies must be JSON (Content-Type: application/json), not '${ctx.get('content-type') || 'none'}'.`,
    });
  }
  try {
    return await getRawBody(ctx.req, { limit, length: length ?? undefined, encoding: 'utf8' });
  } catch (error) {
    if ((error as { type?: string }).type === 'entity.too.large') {
      throw new DomainError({
        kind: 'too_large',
        code: 'payload_too_large',
        message: `Request bodies are limited to ${limit} bytes.`,
        details: { limit_bytes: limit },
      });
    }
    throw new DomainError({ kind: 'invalid', code: 'invalid_body', message: 'The request body could not be read completely.' });
  }
}

/**
 * The dotted path of the first string (or key) holding U+0000, '' for the body itself, else null.
 * PostgreSQL text cannot store it, so it is refused here once for every route.
 */
function pathOfNulCharacter(value: unknown, path = ''): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, child] of Object.entries(value)) {
    const childPath = path ? `${path}.${key}` : key;
    if (key.includes('\u0000')) return childPath;
    const found = pathOfNulCharacter(child, childPath);
    if (found !== null) return found;
  }
  return null;
}
