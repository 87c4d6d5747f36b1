/**
 * The protobuf wire format, read by hand: varints (wire type 0) and length-delimited fields (wire
 * type 2), which is all Tron's transactions use. Varints come back as bigints with no float or Long in
 * between, and each field keeps its exact bytes (Tron's txid hashes raw_data as it travels). Written
 * in src/chains/transfers/tron.ts; read by the devnet's Tron rules and the signing decoder.
 */

import { INT64_MAX } from './transfers/tron';

/** Bytes that are not the message they are read as; `message` names the field. */
export class ProtobufError extends Error {}

const malformed = (message: string) => new ProtobufError(message);

type WireValue = { wireType: 0; value: bigint } | { wireType: 2; value: Uint8Array } | { wireType: 1 | 5 };
export type Fields = Map<number, WireValue[]>;

/** Reads one message's fields; unknown fields are kept (and ignored by the caller), groups are refused. */
export function readMessage(bytes: Uint8Array, name: string): Fields {
  const fields: Fields = new Map();
  let offset = 0;
  const readVarint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (offset >= bytes.length) throw malformed(`${name}: truncated varint`);
      const byte = bytes[offset++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
    throw malformed(`${name}: varint longer than 10 bytes`);
  };
  while (offset < bytes.length) {
    const key = readVarint();
    const field = Number(key >> 3n);
    const wireType = Number(key & 7n);
    if (field === 0 || field > 536_870_911) throw malformed(`${name}: invalid field number`);
    let entry: WireValue;
    if (wireType === 0) entry = { wireType, value: readVarint() };
    else if (wireType === 2) {
      const length = readVarint();
      if (length > BigInt(bytes.length - offset)) throw malformed(`${name}: field ${field} runs past the end`);
      entry = { wireType, value: bytes.subarray(offset, offset + Number(length)) };
      offset += Number(length);
    } else if (wireType === 1 || wireType === 5) {
      offset += wireType === 1 ? 8 : 4;
      if (offset > bytes.length) throw malformed(`${name}: field ${field} runs past the end`);
      entry = { wireType };
    } else throw malformed(`${name}: wire type ${wireType} is not valid here`);
    fields.set(field, [...(fields.get(field) ?? []), entry]);
  }
  return fields;
}

export function repeated(fields: Fields, field: number, name: string, kind: 'bytes'): Uint8Array[] {
  return (fields.get(field) ?? []).map((entry) => {
    if (entry.wireType !== 2) throw malformed(`${name} is not ${kind}`);
    return entry.value;
  });
}

export function single(fields: Fields, field: number, name: string, kind: 'bytes'): Uint8Array | undefined;
export function single(fields: Fields, field: number, name: string, kind: 'varint'): bigint | undefined;
export function single(fields: Fields, field: number, name: string, kind: 'bytes' | 'varint'): Uint8Array | bigint | undefined {
  const entries = fields.get(field) ?? [];
  if (entries.length > 1) throw malformed(`${name} appears more than once`);
  const entry = entries[0];
  if (!entry) return undefined;
  if (entry.wireType !== (kind === 'bytes' ? 2 : 0)) throw malformed(`${name} is not ${kind === 'bytes' ? 'length-delimited' : 'a varint'}`);
  return entry.value;
}

/** A varint read as protobuf int64 (two's complement over 64 bits). */
export function int64(value: bigint, name: string): bigint {
  if (value >= 1n << 64n) throw malformed(`${name} does not fit in 64 bits`);
  return value > INT64_MAX ? value - (1n << 64n) : value;
}
