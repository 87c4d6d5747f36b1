import { DomainError } from '../shared/errors';
import type { KeyProvider } from './provider';

/**
 * Key custody is weak while seeds would be sealed under the public development master key, or
 * under no provider at all: whoever reads the database then holds every key in it. Sandbox keys
 * work regardless (they guard test funds); live keys do not (docs/custody.md, "Key custody").
 */
export const keyCustodyIsWeak = (seedProvider: KeyProvider | undefined): boolean => !seedProvider || seedProvider.development;

/** 503 for every live key while key custody is weak, however the service was started. */
export const keyCustodyUnconfigured = () =>
  new DomainError({
    kind: 'unavailable',
    code: 'key_custody_unconfigured',
    message:
      'Live keys are refused: seeds would be sealed under the public development master key. The operator sets MASTER_KEY (32 random bytes, base64 or hex) or another key provider, and restarts the service.',
  });

/** What the API says once at start while live keys are refused. */
export const WEAK_KEY_CUSTODY_NOTICE =
  'key custody is weak (no MASTER_KEY: the public development master key is in use): every live key answers 503 key_custody_unconfigured, sandbox keys work. Set MASTER_KEY (openssl rand -base64 32) to serve live keys.';
