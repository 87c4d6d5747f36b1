import { randomBytes, randomUUID } from 'node:crypto';

/** UUIDs where the specification demands them (organizations, members, cards, invoices...). */
export const uuid = (): string => randomUUID();

/** Stripe-style prefixed ids where the specification leaves the form open: `key_8f3k...`. */
export function prefixedId(prefix: string, bytes = 12): string {
  return `${prefix}_${randomBytes(bytes).toString('base64url')}`;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Guards uuid columns: a malformed id is simply not found, never a database error. */
export const isUuid = (value: string): boolean => UUID_PATTERN.test(value);
