import { extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { BASE_UNIT_PATTERN, DISPLAY_PATTERN, isBaseUnitAmount, isDisplayAmount, MAX_AMOUNT_DIGITS } from './money';

extendZodWithOpenApi(z);

/**
 * Display-unit decimal carried as a string ("0.015"), at most MAX_AMOUNT_DIGITS digits each side of the
 * point; where the asset is known, `assetAmount` then holds it to the asset's decimals and MAX_BASE_UNITS.
 */
export const DisplayAmount = z
  .string()
  .refine(isDisplayAmount, `must be a non-negative decimal string such as "12.5", at most ${MAX_AMOUNT_DIGITS} digits each side of the point`)
  // The pattern is documented so that generated requests (schemathesis) are the amounts the refinement accepts; no `type`
  // here: it would override the `[string, null]` of a nullable amount.
  .openapi({ pattern: DISPLAY_PATTERN.source, example: '0.015', description: 'Display-unit decimal as a string' });

/** Integer in the asset's smallest unit, carried as a string ("1500000"), at most MAX_AMOUNT_DIGITS digits. */
export const BaseUnitAmount = z
  .string()
  .refine(isBaseUnitAmount, `must be a non-negative integer string in base units, at most ${MAX_AMOUNT_DIGITS} digits`)
  .openapi({ pattern: BASE_UNIT_PATTERN.source, example: '1500000', description: 'Integer in the smallest base unit, as a string' });

/** Whole smallest-unit amount carried as a JSON number (cards: cents; Lightning: sats). */
export const MinorUnitNumber = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/** The deprecated `network` of create requests: accepted, but the key's environment decides the network. */
export const DeprecatedNetwork = z.string().max(64).optional().openapi({
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
