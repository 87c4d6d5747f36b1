import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { SigningSecrets } from './entities';

/** Standard Webhooks secret form: `whsec_` + base64 of 32 random bytes. */
export const generateSigningSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

export function newSigningSecrets(): { secrets: SigningSecrets; plaintext: string } {
  const plaintext = generateSigningSecret();
  return { secrets: { current: plaintext, previous: null, previousExpiresAt: null }, plaintext };
}

/** Replaces the secret; the old one keeps signing for `windowHours` (0: stops at once). */
export function rotateSigningSecrets(secrets: SigningSecrets, windowHours: number, now = new Date()): string {
  const plaintext = generateSigningSecret();
  secrets.previous = windowHours > 0 ? secrets.current : null;
  secrets.previousExpiresAt = windowHours > 0 ? new Date(now.getTime() + windowHours * 3600_000) : null;
  secrets.current = plaintext;
  return plaintext;
}

/** The secrets that sign a delivery now: the current one, and the previous one during its window. */
export function signingSecretsAt(secrets: SigningSecrets, now = new Date()): string[] {
  const previousValid = secrets.previous && secrets.previousExpiresAt && secrets.previousExpiresAt > now;
  return previousValid ? [secrets.current, secrets.previous!] : [secrets.current];
}

/**
 * Standard Webhooks headers. `webhook-signature` holds one `v1,<sig>` per secret, space-separated,
 * so a receiver holding either secret verifies during a rotation.
 */
export function signedHeaders(messageId: string, timestamp: Date, body: string, secrets: string[]): Record<string, string> {
  const signature = secrets.map((secret) => new Webhook(secret).sign(messageId, timestamp, body)).join(' ');
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': signature,
  };
}
