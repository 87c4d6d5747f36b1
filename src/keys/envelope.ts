import { randomBytes } from 'node:crypto';
import { aesGcmDecrypt, aesGcmEncrypt } from './aes-gcm';
import type { KeyProvider, WrappedDataKey } from './provider';

/**
 * A short secret or document sealed for storage in one text column: AES-256-GCM under a fresh
 * data key, the data key wrapped by the KeyProvider, both bound to `context` (which names the
 * purpose and the organization, so a ciphertext opens nowhere else). Stored as compact JSON:
 * `{"v":1,"p":provider,"k":masterKeyId,"w":wrappedDataKey,"c":ciphertext}` (base64 values).
 */
interface TextEnvelope {
  v: 1;
  p: string;
  k: string;
  w: string;
  c: string;
}

const ENVELOPE_PREFIX = '{"v":1,';

export async function sealText(provider: KeyProvider, plaintext: string, context: string): Promise<string> {
  const dataKey = randomBytes(32);
  try {
    const wrapped = await provider.encryptDataKey(dataKey, context);
    const ciphertext = aesGcmEncrypt(dataKey, Buffer.from(plaintext, 'utf8'), context).toString('base64');
    const envelope: TextEnvelope = { v: 1, p: provider.name, k: wrapped.masterKeyId, w: wrapped.ciphertext, c: ciphertext };
    return JSON.stringify(envelope);
  } finally {
    dataKey.fill(0);
  }
}

/** True for a value `sealText` made (as opposed to a legacy value stored in clear). */
export const isSealedText = (value: string): boolean => value.startsWith(ENVELOPE_PREFIX);

/**
 * Inverse of sealText; throws when the master key (which names its provider: a previous key of
 * another provider opens during a rotation), the context or any byte differs.
 */
export async function openText(provider: KeyProvider, sealed: string, context: string): Promise<string> {
  const envelope = readEnvelope(sealed);
  const dataKey = await provider.decryptDataKey({ masterKeyId: envelope.k, ciphertext: envelope.w }, context);
  try {
    return aesGcmDecrypt(dataKey, Buffer.from(envelope.c, 'base64'), context).toString('utf8');
  } finally {
    dataKey.fill(0);
  }
}

function readEnvelope(sealed: string): TextEnvelope {
  const envelope = JSON.parse(sealed) as TextEnvelope;
  if (envelope.v !== 1) throw new Error(`unknown envelope version ${String(envelope.v)}`);
  return envelope;
}

/** The master key that wrapped a sealed value's data key, and the wrapped key (keys:rotate re-wraps it). */
export function envelopeDataKey(sealed: string): WrappedDataKey {
  const envelope = readEnvelope(sealed);
  return { masterKeyId: envelope.k, ciphertext: envelope.w };
}

/** The same sealed value with its data key wrapped anew (by `provider`): the ciphertext under the data key is kept. */
export function withDataKey(sealed: string, provider: string, wrapped: WrappedDataKey): string {
  const envelope: TextEnvelope = { ...readEnvelope(sealed), p: provider, k: wrapped.masterKeyId, w: wrapped.ciphertext };
  return JSON.stringify(envelope);
}
