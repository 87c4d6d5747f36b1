import type { ChainId } from '../../catalogue/service';
import type { HashFunction } from '../entities';
import { decodeEvmPayload } from './evm';
import { decodeSolanaMessage } from './solana';
import { decodeTronRawData } from './tron';
import { UNDECODED, type DecodedSignedPayload } from './types';

export { readPsbt } from './bitcoin';
export { readTypedData } from './eip712';
export type { DecodedSignedPayload, SignedAsset, SignedPayloadKind } from './types';

/**
 * What `payload` authorizes when the wallet's key signs it under `hashFunction`: each chain's payloads
 * are read only under the hash its signers apply to them (a transaction is never a digest given as
 * is), so what is decoded is what the signature is over. Typed data (hash_function eip712) is read
 * by `readTypedData`, which also computes its digest, and a PSBT (hash_function psbt) by `readPsbt`,
 * which computes the signed input's sighash.
 */
export function decodeSignedPayload(chain: ChainId, hashFunction: HashFunction, payload: Uint8Array): DecodedSignedPayload {
  if (chain === 'ethereum' && hashFunction === 'keccak256') return decodeEvmPayload(payload) ?? UNDECODED;
  if (chain === 'tron' && hashFunction === 'sha256') return decodeTronRawData(payload) ?? UNDECODED;
  if (chain === 'solana' && (hashFunction === 'not_applicable' || hashFunction === 'no_op')) return decodeSolanaMessage(payload) ?? UNDECODED;
  return UNDECODED;
}
