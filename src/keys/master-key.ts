import { createHash } from 'node:crypto';

const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const BASE64_KEY = /^[A-Za-z0-9+/_-]{43}=?$/;

/** A 32-byte master key written as 64 hex characters or as (url-safe) base64; null when it is neither. */
export function parseMasterKey(value: string): Buffer | null {
  const trimmed = value.trim();
  if (HEX_KEY.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (BASE64_KEY.test(trimmed)) {
    const bytes = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    return bytes.length === 32 ? bytes : null;
  }
  return null;
}

/**
 * The key used in development and tests when MASTER_KEY is unset. It is public by construction
 * (anyone can compute it), so it protects nothing: production refuses to start without MASTER_KEY.
 */
export const DEVELOPMENT_MASTER_KEY: Buffer = createHash('sha256').update('custody-platform development master key').digest();
