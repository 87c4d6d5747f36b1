import { ed25519 } from '@noble/curves/ed25519';
import { secp256k1 } from '@noble/curves/secp256k1';
import type { DerivedKey } from './derivation';

export interface RawSignature {
  /** 32 bytes each; for ed25519 the R and S halves of the signature. */
  r: Uint8Array;
  s: Uint8Array;
  /** secp256k1: the public-key recovery id (0..3); ed25519: 0, it has none. */
  recoveryId: number;
  /** secp256k1: `r || s || (27 + recovery id)` (65 bytes); ed25519: `R || S` (64 bytes). */
  bytes: Uint8Array;
}

/**
 * secp256k1: deterministic (RFC 6979) low-S ECDSA over a 32-byte digest, recoverable.
 * ed25519: RFC 8032 over the message bytes themselves.
 */
export function signWithKey(key: DerivedKey, message: Uint8Array): RawSignature {
  if (key.curve === 'ed25519') {
    const bytes = ed25519.sign(message, key.privateKey);
    return { r: bytes.slice(0, 32), s: bytes.slice(32), recoveryId: 0, bytes };
  }
  if (message.length !== 32) throw new Error('secp256k1 signs 32-byte digests only');
  const signature = secp256k1.sign(message, key.privateKey, { lowS: true });
  const compact = signature.toCompactRawBytes();
  const bytes = new Uint8Array(65);
  bytes.set(compact);
  bytes[64] = 27 + signature.recovery;
  return { r: compact.slice(0, 32), s: compact.slice(32), recoveryId: signature.recovery, bytes };
}
