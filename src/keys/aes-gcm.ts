import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** AES-256-GCM with a fresh 96-bit IV; the result is `iv || ciphertext || tag`. */
export function aesGcmEncrypt(key: Uint8Array, plaintext: Uint8Array, associatedData: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(associatedData, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, ciphertext, cipher.getAuthTag()]);
}

/** Inverse of aesGcmEncrypt; throws when the key, the associated data or any byte is wrong. */
export function aesGcmDecrypt(key: Uint8Array, sealed: Uint8Array, associatedData: string): Buffer {
  const bytes = Buffer.from(sealed);
  if (bytes.length < IV_BYTES + TAG_BYTES) throw new Error('sealed value is too short');
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(associatedData, 'utf8'));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  // The plaintext may be a secret its caller wipes: no copy of it is left behind here, even when the tag is wrong.
  const body = decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES));
  try {
    const tail = decipher.final();
    const plaintext = Buffer.alloc(body.length + tail.length);
    plaintext.set(body);
    plaintext.set(tail, body.length);
    tail.fill(0);
    return plaintext;
  } finally {
    body.fill(0);
  }
}
