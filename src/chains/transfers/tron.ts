import { secp256k1 } from '@noble/curves/secp256k1';
import { sha256 } from '@noble/hashes/sha256';
import { bytesToHex, concatBytes, hexToBytes } from '@noble/hashes/utils';
import { base58check } from '@scure/base';
import { errors } from '../../shared/errors';
import type { RecentBlock } from '../provider';
import type { CheckedTransfer, SignedTransfer, SigningKey } from './index';

/**
 * Tron's transaction: the protobuf `protocol.Transaction { raw raw_data = 1; repeated bytes signature = 2; }`
 * (java-tron's Tron.proto), broadcast as the hex of its bytes; the txid is sha256 of the raw_data bytes,
 * the signature a recoverable secp256k1 signature over it (r ‖ s ‖ 27 + v, as TronWeb writes it).
 * The devnet's rules (src/chains/devnet/rules/tron.ts) read what is written here.
 */

export const TRANSFER_CONTRACT = { type: 1n, typeUrl: 'type.googleapis.com/protocol.TransferContract' } as const;
export const TRIGGER_SMART_CONTRACT = { type: 31n, typeUrl: 'type.googleapis.com/protocol.TriggerSmartContract' } as const;
/** keccak256("transfer(address,uint256)")[0..4]. */
export const TRC20_TRANSFER_SELECTOR = hexToBytes('a9059cbb');
export const TRON_ADDRESS_PREFIX = 0x41;
export const INT64_MAX = (1n << 63n) - 1n;
const UINT256_MAX = (1n << 256n) - 1n;
/** How long a transaction stays valid after its reference block, as TronWeb's default (java-tron allows up to 24 h). */
export const TRON_EXPIRATION_MS = 60_000;

export const tronBase58 = base58check(sha256);

/**
 * A TRX TransferContract, or a TRC-20 `transfer(to, amount)` through TriggerSmartContract with the flat
 * fee as its fee_limit. raw_data references `recentBlock` (TAPOS: ref_block_bytes are bytes 6-8 of its
 * height, ref_block_hash bytes 8-16 of its id), is stamped with its time and expires TRON_EXPIRATION_MS
 * later; raw_data.data (the memo) carries the platform's reference, so identical terms still make
 * distinct transactions. Nothing else varies: the same transfer gives the same txid.
 */
export function signTronTransfer({ transfer, to, token }: CheckedTransfer, keys: SigningKey[]): SignedTransfer {
  if (transfer.fee.model !== 'flat') throw errors.validation('A Tron transfer takes flat fee terms.', 'fee');
  if (!transfer.recentBlock) throw errors.validation('A Tron transfer needs the recent block it references.', 'recent_block');
  const owner = tronAddressBytes(transfer.from);
  const recipient = tronAddressBytes(to);
  let contract: Uint8Array;
  let feeLimit: Uint8Array = new Uint8Array();
  if (!token) {
    if (transfer.amount > INT64_MAX) throw errors.validation('A TRX amount must fit an int64.', 'amount');
    contract = contractMessage(TRANSFER_CONTRACT, concatBytes(bytesField(1, owner), bytesField(2, recipient), varintField(3, transfer.amount)));
  } else {
    if (transfer.amount > UINT256_MAX) throw errors.validation('A token amount must fit a uint256.', 'amount');
    if (transfer.fee.fee < 0n || transfer.fee.fee > INT64_MAX) throw errors.validation('The fee limit must be a non-negative int64.', 'fee');
    const data = concatBytes(TRC20_TRANSFER_SELECTOR, new Uint8Array(12), recipient.subarray(1), hexToBytes(transfer.amount.toString(16).padStart(64, '0')));
    contract = contractMessage(TRIGGER_SMART_CONTRACT, concatBytes(bytesField(1, owner), bytesField(2, tronAddressBytes(token)), bytesField(4, data)));
    feeLimit = varintField(18, transfer.fee.fee);
  }
  const { refBlockBytes, refBlockHash, time } = reference(transfer.recentBlock);
  // Fields in field-number order, as protobuf encoders write them.
  const rawData = concatBytes(
    bytesField(1, refBlockBytes),
    bytesField(4, refBlockHash),
    varintField(8, time + BigInt(TRON_EXPIRATION_MS)),
    bytesField(10, new TextEncoder().encode(transfer.reference)),
    bytesField(11, contract),
    varintField(14, time),
    feeLimit,
  );
  const txid = sha256(rawData);
  const signature = secp256k1.sign(txid, keys[0]!.privateKey);
  const signed = concatBytes(signature.toCompactRawBytes(), Uint8Array.of(27 + signature.recovery));
  return { raw: bytesToHex(concatBytes(bytesField(1, rawData), bytesField(2, signed))), txid: bytesToHex(txid) };
}

function reference(block: RecentBlock) {
  const hash = block.hash.replace(/^0x/, '');
  if (!/^[0-9a-fA-F]{64}$/.test(hash)) throw errors.validation('The recent block hash is not 32 bytes of hex.', 'recent_block');
  if (!Number.isSafeInteger(block.height) || block.height < 0) throw errors.validation('The recent block height is not a block height.', 'recent_block');
  const height = new Uint8Array(8);
  new DataView(height.buffer).setBigUint64(0, BigInt(block.height));
  return { refBlockBytes: height.subarray(6, 8), refBlockHash: hexToBytes(hash).subarray(8, 16), time: BigInt(block.time.getTime()) };
}

function contractMessage(kind: { type: bigint; typeUrl: string }, value: Uint8Array): Uint8Array {
  const parameter = concatBytes(bytesField(1, new TextEncoder().encode(kind.typeUrl)), bytesField(2, value));
  return concatBytes(varintField(1, kind.type), bytesField(2, parameter));
}

/** A Tron address (base58check, 0x41 prefix) as its 21 bytes; the caller has checked it. */
const tronAddressBytes = (address: string): Uint8Array => tronBase58.decode(address);

function varint(value: bigint): Uint8Array {
  const out: number[] = [];
  do {
    const low = Number(value & 0x7fn);
    value >>= 7n;
    out.push(value > 0n ? low | 0x80 : low);
  } while (value > 0n);
  return Uint8Array.from(out);
}

const varintField = (field: number, value: bigint) => concatBytes(varint(BigInt(field << 3)), varint(value));
const bytesField = (field: number, value: Uint8Array) => concatBytes(varint(BigInt((field << 3) | 2)), varint(BigInt(value.length)), value);
