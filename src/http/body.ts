import getRawBody from 'raw-body';
import { DomainError } from '../shared/errors';
import type { AppContext } from './context';

/**
 * Reads a JSON body: JSON only (415), at most `limit` bytes (413), well-formed (400 invalid_json).
 * An empty body is `undefined`, so routes without a body accept bare POSTs.
 */
export async function readJsonBody(ctx: AppContext, limit: number): Promise<unknown> {
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
  let raw: string;
  try {
    raw = await getRawBody(ctx.req, { limit, length: length ?? undefined, encoding: 'utf8' });
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
  if (raw.trim() === '') return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch (error) {
    throw new DomainError({
      kind: 'invalid',
      code: 'invalid_json',
      message: `The request body is not valid JSON: ${(error as Error).message}`,
    });
  }
}
