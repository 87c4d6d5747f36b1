import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Webhook } from 'standardwebhooks';
import { isSealedText, openText, sealText } from '../keys/envelope';
import type { KeyProvider } from '../keys/provider';
import { envelopeColumn, type SealedColumn } from '../keys/rotation';
import type { SigningSecrets } from './entities';

/** Standard Webhooks secret form: `whsec_` + base64 of 32 random bytes. */
export const generateSigningSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

/**
 * Signing secrets are stored envelope-encrypted (src/keys/envelope.ts), bound to their
 * organization. A value that still starts with `whsec_` was stored in clear before secrets were
 * sealed: it is read as is, and `npm run cli -- migrate` seals it (sealClearSigningSecrets).
 */
const signingSecretContext = (organizationId: string) => `custody-platform/signing-secret/v1/${organizationId}`;

const sealSecret = (keys: KeyProvider, organizationId: string, plaintext: string) => sealText(keys, plaintext, signingSecretContext(organizationId));

async function openSecret(keys: KeyProvider, organizationId: string, stored: string): Promise<string> {
  return isSealedText(stored) ? openText(keys, stored, signingSecretContext(organizationId)) : stored;
}

/** A new destination's secrets (sealed) and the plaintext, returned once to the caller. */
export async function newSigningSecrets(keys: KeyProvider, organizationId: string): Promise<{ secrets: SigningSecrets; plaintext: string }> {
  const plaintext = generateSigningSecret();
  return { secrets: { current: await sealSecret(keys, organizationId, plaintext), previous: null, previousExpiresAt: null }, plaintext };
}

/** Replaces the secret; the old one keeps signing for `windowHours` (0: stops at once). Returns the new plaintext. */
export async function rotateSigningSecrets(
  keys: KeyProvider,
  organizationId: string,
  secrets: SigningSecrets,
  windowHours: number,
  now = new Date(),
): Promise<string> {
  const plaintext = generateSigningSecret();
  const sealed = await sealSecret(keys, organizationId, plaintext);
  secrets.previous = windowHours > 0 ? secrets.current : null;
  secrets.previousExpiresAt = windowHours > 0 ? new Date(now.getTime() + windowHours * 3600_000) : null;
  secrets.current = sealed;
  return plaintext;
}

/** The secrets (opened) that sign a delivery now: the current one, and the previous one during its window. */
export async function signingSecretsAt(keys: KeyProvider, organizationId: string, secrets: SigningSecrets, now = new Date()): Promise<string[]> {
  const previousValid = secrets.previous && secrets.previousExpiresAt && secrets.previousExpiresAt > now;
  const stored = previousValid ? [secrets.current, secrets.previous!] : [secrets.current];
  return Promise.all(stored.map((value) => openSecret(keys, organizationId, value)));
}

/** Every table holding a SigningSecrets embeddable, with its column prefix. */
const SECRET_TABLES = [
  { table: 'webhook_endpoints', prefix: 'secret_' },
  { table: 'subscriptions', prefix: 'secret_' },
  { table: 'cards', prefix: 'webhook_secret_' },
] as const;

/** Where keys:rotate finds the signing secrets' data keys: the current and the previous secret of each table. */
export const signingSecretColumns: SealedColumn[] = SECRET_TABLES.flatMap(({ table, prefix }) =>
  ['current', 'previous'].map((which) => envelopeColumn(table, `${prefix}${which}`, ['organization_id'], (row) => signingSecretContext(row.organization_id as string))),
);

/**
 * Seals the signing secrets still stored in clear (rows written before secrets were sealed). A
 * migration cannot reach the KeyProvider, so `cli migrate` runs this right after the migrations;
 * until it has, a clear value is still read as is. Each row is updated only if unchanged since it
 * was read (a rotation meanwhile wins). Returns the number of rows sealed.
 */
export async function sealClearSigningSecrets(em: EntityManager, keys: KeyProvider): Promise<number> {
  const connection = em.getConnection();
  let sealed = 0;
  for (const { table, prefix } of SECRET_TABLES) {
    const current = `${prefix}current`;
    const previous = `${prefix}previous`;
    const rows = await connection.execute<{ id: string; organization_id: string; current: string; previous: string | null }[]>(
      `select id, organization_id, "${current}" as current, "${previous}" as previous from "${table}"
       where "${current}" like 'whsec\\_%' or "${previous}" like 'whsec\\_%'`,
      [],
      'all',
    );
    for (const row of rows) {
      const seal = async (value: string | null) =>
        value !== null && !isSealedText(value) ? sealSecret(keys, row.organization_id, value) : value;
      const updated = await connection.execute<{ id: string }[]>(
        `update "${table}" set "${current}" = ?, "${previous}" = ?
         where id = ? and "${current}" = ? and "${previous}" is not distinct from ? returning id`,
        [await seal(row.current), await seal(row.previous), row.id, row.current, row.previous],
        'all',
      );
      sealed += updated.length;
    }
  }
  return sealed;
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
