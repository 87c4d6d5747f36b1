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
  const unstorable = firstUnstorableString(body);
  if (unstorable !== null) throw errors.validation(`Invalid ${unstorable.path || 'body'}: ${unstorable.reason}`, unstorable.path || 'body');
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

const NUL = 'strings must not contain the NUL character (\\u0000).';
const LONE_SURROGATE = 'strings must be well-formed Unicode: a lone surrogate such as \\ud800 is not a character.';
// With the u flag a surrogate pair is one code point, so this matches only a surrogate without its partner.
const LONE_SURROGATE_PATTERN = /\p{Surrogate}/u;

const unstorableReason = (text: string): string | null =>
  text.includes('\u0000') ? NUL : LONE_SURROGATE_PATTERN.test(text) ? LONE_SURROGATE : null;

/**
 * The dotted path ('' for the body itself) of the first string or key PostgreSQL text cannot store:
 * one holding U+0000, or a lone surrogate (JSON's "\ud800" parses to one; no UTF-8 encodes it). Refused
 * here once for every route, so no such string reaches a column, an event or a webhook payload.
 */
function firstUnstorableString(value: unknown, path = ''): { path: string; reason: string } | null {
  if (typeof value === 'string') {
    const reason = unstorableReason(value);
    return reason === null ? null : { path, reason };
  }
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, child] of Object.entries(value)) {
    const childPath = path ? `${path}.${key}` : key;
    const keyReason = unstorableReason(key);
    if (keyReason !== null) return { path: childPath, reason: keyReason };
    const found = firstUnstorableString(child, childPath);
    if (found !== null) return found;
  }
  return null;
}
