import { equalBytes } from '@noble/curves/abstract/utils';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils';
import { ProtobufError, readMessage, repeated, single, type Fields } from '../../chains/protobuf';
import { TRANSFER_CONTRACT, TRC20_TRANSFER_SELECTOR, TRIGGER_SMART_CONTRACT, TRON_ADDRESS_PREFIX, tronBase58 } from '../../chains/transfers/tron';
import type { DecodedSignedPayload } from './types';

/**
 * A Tron transaction's raw_data (`protocol.Transaction.raw`, java-tron's Tron.proto), which TronWeb
 * signs by its txid, sha256(raw_data): hash_function sha256 over the raw_data bytes. A TRX
 * TransferContract gives its recipient and amount; a TriggerSmartContract calling a TRC-20
 * `transfer(address,uint256)` or `approve(address,uint256)` with no TRX attached its token, recipient
 * or spender, and amount; any other call its contract, of unknown value; any other contract (a
 * permission update, a freeze, several contracts) nothing. Bytes that are no raw_data decode to null.
 */

const TRC20_APPROVE_SELECTOR = hexToBytes('095ea7b3');
const PROTOCOL_TYPE_URL = 'type.googleapis.com/protocol.';
const EMPTY = new Uint8Array();

export function decodeTronRawData(payload: Uint8Array): DecodedSignedPayload | null {
  try {
    const contracts = repeated(readMessage(payload, 'raw'), 11, 'raw.contract', 'bytes').map((contract) => {
      const fields = readMessage(contract, 'Contract');
      const parameter = readMessage(single(fields, 2, 'Contract.parameter', 'bytes') ?? EMPTY, 'Any');
      const typeUrl = new TextDecoder().decode(single(parameter, 1, 'Any.type_url', 'bytes') ?? EMPTY);
      return { type: single(fields, 1, 'Contract.type', 'varint') ?? 0n, typeUrl, value: single(parameter, 2, 'Any.value', 'bytes') ?? EMPTY };
    });
    // What is no Tron transaction may still parse as protobuf: a transaction names its contracts' protocol types.
    if (contracts.length === 0 || !contracts.every((contract) => contract.typeUrl.startsWith(PROTOCOL_TYPE_URL))) return null;
    const [contract] = contracts;
    const effect = contracts.length === 1 ? readContract(contract!.type, contract!.typeUrl, readMessage(contract!.value, contract!.typeUrl)) : {};
    return { kind: 'tron_transaction', ...effect };
  } catch (error) {
    if (error instanceof ProtobufError) return null;
    throw error;
  }
}

function readContract(type: bigint, typeUrl: string, value: Fields): Omit<DecodedSignedPayload, 'kind'> {
  const address = (field: number) => {
    const bytes = single(value, field, `${typeUrl}.${field}`, 'bytes');
    return bytes?.length === 21 && bytes[0] === TRON_ADDRESS_PREFIX ? tronBase58.encode(bytes) : undefined;
  };
  const amount = (field: number) => single(value, field, `${typeUrl}.${field}`, 'varint') ?? 0n;
  if (type === TRANSFER_CONTRACT.type && typeUrl === TRANSFER_CONTRACT.typeUrl) {
    const to = address(2);
    return to ? { destination: to, asset: { native: true }, amount: amount(3) } : {};
  }
  if (type !== TRIGGER_SMART_CONTRACT.type || typeUrl !== TRIGGER_SMART_CONTRACT.typeUrl) return {};
  const contract = address(2);
  if (!contract) return {};
  const data = single(value, 4, `${typeUrl}.data`, 'bytes') ?? EMPTY;
  const selector = data.subarray(0, 4);
  const token = equalBytes(selector, TRC20_TRANSFER_SELECTOR) || equalBytes(selector, TRC20_APPROVE_SELECTOR);
  // The TVM reads an address argument as its low 20 bytes, whatever TronWeb or Trust Wallet wrote above them.
  if (!token || data.length !== 68 || amount(3) !== 0n || amount(5) !== 0n) return { destination: contract };
  const target = tronBase58.encode(Uint8Array.of(TRON_ADDRESS_PREFIX, ...data.subarray(16, 36)));
  const units = BigInt(`0x${bytesToHex(data.subarray(36, 68))}`);
  const spender = equalBytes(selector, TRC20_APPROVE_SELECTOR) ? { spender: target } : {};
  return { destination: target, ...spender, asset: { contract }, amount: units };
}
