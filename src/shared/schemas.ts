import { extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { BASE_UNIT_PATTERN, DISPLAY_PATTERN, isBaseUnitAmount, isDisplayAmount, isPositiveDisplayAmount, MAX_AMOUNT_DIGITS, POSITIVE_DISPLAY_PATTERN } from './money';

extendZodWithOpenApi(z);

/** An amount sent as a JSON number (or anything but a string) is told what it must be; a missing one is "required" (the API's error map). */
const amountTypeError = (form: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? undefined : `must be ${form}${typeof issue.input === 'number' ? ' (a string, not a JSON number)' : ''}`;

/**
 * Display-unit decimal carried as a string ("0.015"), at most MAX_AMOUNT_DIGITS digits each side of the
 * point; where the asset is known, `assetAmount` then holds it to the asset's decimals and MAX_BASE_UNITS.
 */
export const DisplayAmount = z
  .string({ error: amountTypeError('a decimal string such as "12.5"') })
  .refine(isDisplayAmount, `must be a non-negative decimal string such as "12.5", at most ${MAX_AMOUNT_DIGITS} digits each side of the point`)
  // The pattern is documented so that generated requests (schemathesis) are the amounts the refinement accepts; no `type`
  // here: it would override the `[string, null]` of a nullable amount.
  .openapi({ pattern: DISPLAY_PATTERN.source, example: '0.015', description: 'Display-unit decimal as a string' });

/** A DisplayAmount greater than zero: what a send, a deposit, a refill or a threshold moves or compares against. */
export const PositiveDisplayAmount = z
  .string({ error: amountTypeError('a decimal string such as "12.5"') })
  .refine(isPositiveDisplayAmount, `must be a decimal string greater than zero such as "12.5", at most ${MAX_AMOUNT_DIGITS} digits each side of the point`)
  .openapi({ pattern: POSITIVE_DISPLAY_PATTERN.source, example: '0.015', description: 'Display-unit decimal as a string, greater than zero' });

/** Integer in the asset's smallest unit, carried as a string ("1500000"), at most MAX_AMOUNT_DIGITS digits. */
export const BaseUnitAmount = z
  .string({ error: amountTypeError('an integer string in base units such as "1500000"') })
  .refine(isBaseUnitAmount, `must be a non-negative integer string in base units, at most ${MAX_AMOUNT_DIGITS} digits`)
  .openapi({ pattern: BASE_UNIT_PATTERN.source, example: '1500000', description: 'Integer in the smallest base unit, as a string' });

/** Whole smallest-unit amount carried as a JSON number (cards: cents; Lightning: sats). */
export const MinorUnitNumber = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/**
 * The cap of a request integer that nothing smaller bounds: the largest PostgreSQL integer (int4). The
 * document states it, so no integer past 2^53 (which zod's `.int()` refuses) is a valid request.
 */
export const INT4_MAX = 2_147_483_647;

/**
 * A string's length as JSON Schema counts it, in code points: zod's `.min()` and `.max()` count UTF-16
 * units, so an astral character (an emoji) is 2 there and 1 in the document.
 */
function codePointLength(value: string): number {
  let surrogatePairs = 0;
  for (let index = 0; index < value.length - 1; index++) {
    const unit = value.charCodeAt(index);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        surrogatePairs++;
        index++;
      }
    }
  }
  return value.length - surrogatePairs;
}

function withinLength(value: string, min: number, max: number): boolean {
  // At most 2 UTF-16 units per code point: a longer string is refused without counting.
  if (value.length > 2 * max) return false;
  const length = codePointLength(value);
  return length >= min && length <= max;
}

/** A string of `min` to `max` characters, counted in code points in validation as in the document. */
export const text = (min: number, max: number) =>
  z
    .string()
    .refine((value) => withinLength(value, min, max), min > 0 ? `must be ${min} to ${max} characters` : `must be at most ${max} characters`)
    .openapi(min > 0 ? { minLength: min, maxLength: max } : { maxLength: max });

// What String.prototype.trim (zod's `.trim()`) removes: ECMAScript's WhiteSpace and LineTerminator, spelled
// out, since a validator compiling the pattern in another engine (schemathesis: Python, ASCII `\s`) reads `\s` otherwise.
const TRIMMED_CHARACTERS = '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';
/** One character that trimming keeps. */
const KEPT_CHARACTER = `[^${TRIMMED_CHARACTERS}]`;

/**
 * A string of at most `max` characters as sent, trimmed, then at least `min` characters (1 or 2). The
 * document says both: `maxLength` of what is sent, and a pattern of `min` characters from the first to
 * the last that trimming keeps (a `minLength` would count the spaces zod trims first: `"\r\u00e9"`).
 */
export function trimmedText(min: 1 | 2, max: number) {
  return z
    .string()
    .refine((value) => withinLength(value, 0, max), `must be at most ${max} characters`)
    .trim()
    .refine((value) => codePointLength(value) >= min, `must be at least ${min} characters besides surrounding spaces`)
    .openapi({ minLength: min, maxLength: max, pattern: min === 1 ? KEPT_CHARACTER : `${KEPT_CHARACTER}[\\s\\S]*${KEPT_CHARACTER}` });
}

/** The deprecated `network` of create requests: accepted, but the key's environment decides the network. */
export const DeprecatedNetwork = text(0, 64).optional().openapi({
  deprecated: true,
  description: "Deprecated. The key's environment decides the network (live: mainnet, sandbox: the chain's testnet); a contradicting value is ignored.",
});

/** An email address; the document gives zod's own pattern, stricter than `format: email`. */
export const Email = z.email().max(320).openapi({ pattern: z.regexes.email.source });

export const Timestamp = z.string().openapi({ format: 'date-time', example: '2026-05-15T12:00:00.000Z' });

export const ErrorEnvelope = z
  .object({
    error: z.object({
      code: z.string(),
      type: z.enum([
        'invalid_request_error',
        'authentication_error',
        'permission_error',
        'conflict_error',
        'idempotency_error',
        'rate_limit_error',
        'provider_error',
        'api_error',
      ]),
      message: z.string(),
      param: z.string().optional(),
      request_id: z.string(),
      details: z.record(z.string(), z.unknown()),
    }),
  })
  .openapi('Error');

/** `/v1` list: `{object: "list", data, has_more, next_cursor}`. */
export function listEnvelopeSchema<T extends z.ZodType>(item: T) {
  return z.object({
    object: z.literal('list'),
    data: z.array(item),
    has_more: z.boolean(),
    next_cursor: z.string().nullable(),
  });
}

/** Card and Lightning responses: `{success, message, data, metadata: {request_id}, timestamp}`. */
export function resultEnvelopeSchema<T extends z.ZodType>(data: T) {
  return z.object({
    success: z.boolean(),
    message: z.string(),
    data,
    metadata: z.object({ request_id: z.string() }),
    timestamp: Timestamp,
  });
}

export function resultEnvelope<T>(requestId: string, message: string, data: T, success = true) {
  return { success, message, data, metadata: { request_id: requestId }, timestamp: new Date().toISOString() };
}

export { z };
