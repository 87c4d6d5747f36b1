import { equalBytes } from '@noble/curves/abstract/utils';
import { secp256k1 } from '@noble/curves/secp256k1';
import { sha256 } from '@noble/hashes/sha256';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils';
import { ASSETS } from '../../../catalogue/service';
import { secp256k1Address } from '../../../keys/derivation';
import { int64, ProtobufError, readMessage, repeated, single, type Fields } from '../../protobuf';
import { TRANSFER_CONTRACT, TRC20_TRANSFER_SELECTOR, TRIGGER_SMART_CONTRACT, TRON_ADDRESS_PREFIX, tronBase58 } from '../../transfers/tron';
import { DevnetRejection, type AccountTransaction, type AccountTransferIntent, type ChainRules, type DecodeContext } from './types';

/**
 * Tron's rules: a transaction is the protobuf `protocol.Transaction { raw raw_data = 1; repeated bytes
 * signature = 2; }` (java-tron's Tron.proto), broadcast as the hex of its bytes. The txid is sha256 of the
 * raw_data bytes exactly as they travel, so decode hashes them before reading them; each signature is a
 * recoverable secp256k1 signature over the txid (r ‖ s ‖ v, v 0/1 or 27/28 as TronWeb writes it).
 *
 * The protobuf wire format is read by hand (src/chains/protobuf.ts) rather than with protobufjs: Tron's
 * int64 amounts come back as bigints with no float or Long in between, and the reader keeps each
 * field's exact bytes, which the txid needs.
 */

/**
 * Tron bills bandwidth, not a fee the sender names. A TRX transfer burns the bandwidth of its ~268 bytes
 * at 1,000 sun a byte when the sender has no free or staked bandwidth left: the flat fee the devnet
 * announces and charges for it. A contract call (TRC-20) names its cap in raw_data.fee_limit, reported
 * as maxFee and feeBid.
 */
export const TRON_TRANSFER_FEE_SUN = 268_000n;

const malformed = (message: string) => new DevnetRejection('malformed', message);

/** `read`, with bytes that are no protobuf message refused as malformed. */
function readingProtobuf<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw error instanceof ProtobufError ? malformed(error.message) : error;
  }
}

export const tronRules: ChainRules = {
  chain: 'tron',
  decode: (raw, context) => readingProtobuf(() => decodeTronTransaction(raw, context)),
  addressOf: (publicKey) => secp256k1Address({ chain: 'tron', testnet: true, format: 'base58check' }, publicKey),
};

/** The transaction's raw_data bytes, its signatures, and its txid (sha256 of raw_data exactly as it travels). */
function readEnvelope(raw: string) {
  if (!/^([0-9a-fA-F]{2})+$/.test(raw)) throw malformed('a Tron transaction is the hex of its protobuf bytes');
  const transaction = readMessage(hexToBytes(raw), 'Transaction');
  const rawData = single(transaction, 1, 'Transaction.raw_data', 'bytes');
  if (!rawData) throw malformed('the transaction has no raw_data');
  return { rawData, signatures: repeated(transaction, 2, 'Transaction.signature', 'bytes'), txid: sha256(rawData) };
}

/**
 * The addresses the signatures of any Tron transaction (whatever its contract) recover to: the keys that
 * authorised it. Throws DevnetRejection when the bytes are no Transaction or a signature recovers no key.
 */
export function tronSigners(raw: string): string[] {
  const { signatures, txid } = readingProtobuf(() => readEnvelope(raw));
  return signatures.map((signature) => signerOf(signature, txid));
}

function decodeTronTransaction(raw: string, context: DecodeContext): AccountTransaction {
  const { rawData, signatures, txid } = readEnvelope(raw);

  const body = readMessage(rawData, 'Transaction.raw');
  const contracts = repeated(body, 11, 'raw.contract', 'bytes');
  if (contracts.length !== 1) throw malformed(`a Tron transaction carries exactly one contract, not ${contracts.length}`);
  const contract = readMessage(contracts[0]!, 'Contract');
  if ((single(contract, 5, 'Contract.Permission_id', 'varint') ?? 0n) !== 0n) {
    throw malformed('only the owner permission (Permission_id 0) is supported: the devnet does not model multi-signature permissions');
  }
  const type = single(contract, 1, 'Contract.type', 'varint') ?? 0n;
  const parameter = readMessage(single(contract, 2, 'Contract.parameter', 'bytes') ?? new Uint8Array(), 'Any');
  const typeUrl = new TextDecoder().decode(single(parameter, 1, 'Any.type_url', 'bytes') ?? new Uint8Array());
  const value = () => readMessage(single(parameter, 2, 'Any.value', 'bytes') ?? new Uint8Array(), typeUrl);

  let intent: { owner: Uint8Array; transfer: AccountTransferIntent; maxFee: bigint };
  if (type === TRANSFER_CONTRACT.type && typeUrl === TRANSFER_CONTRACT.typeUrl) intent = readTransferContract(value());
  else if (type === TRIGGER_SMART_CONTRACT.type && typeUrl === TRIGGER_SMART_CONTRACT.typeUrl) {
    intent = readTrc20Transfer(value(), context.tokens, int64(single(body, 18, 'raw.fee_limit', 'varint') ?? 0n, 'raw.fee_limit'));
  } else {
    throw malformed(`contract type ${type} (${typeUrl || 'no type_url'}) is not supported: the devnet understands TransferContract and TRC-20 transfer calls`);
  }

  if (signatures.length === 0) throw new DevnetRejection('invalid_signature', 'the transaction is not signed');
  if (signatures.length > 1) throw malformed(`a Tron transaction from one owner carries one signature, not ${signatures.length}`);
  const from = tronAddress(intent.owner);
  if (signerOf(signatures[0]!, txid) !== from) {
    throw new DevnetRejection('invalid_signature', `the signature does not recover to the owner ${from}`);
  }
  return {
    model: 'account',
    txid: bytesToHex(txid),
    from,
    nonce: null,
    maxFee: intent.maxFee,
    feeBid: intent.maxFee,
    transfers: [intent.transfer],
    raw: raw.toLowerCase(),
  };
}

/** protocol.TransferContract { bytes owner_address = 1; bytes to_address = 2; int64 amount = 3; }: TRX in sun. */
function readTransferContract(value: Fields) {
  const owner = addressBytes(single(value, 1, 'TransferContract.owner_address', 'bytes'), 'owner_address');
  const to = addressBytes(single(value, 2, 'TransferContract.to_address', 'bytes'), 'to_address');
  const amount = int64(single(value, 3, 'TransferContract.amount', 'varint') ?? 0n, 'amount');
  if (amount <= 0n) throw malformed('the TRX amount must be positive');
  if (equalBytes(owner, to)) throw malformed('cannot transfer TRX to yourself');
  return { owner, maxFee: TRON_TRANSFER_FEE_SUN, transfer: { position: 'native', to: tronAddress(to), assetId: 'TRX', amount } };
}

/**
 * protocol.TriggerSmartContract { bytes owner_address = 1; bytes contract_address = 2; int64 call_value = 3;
 * bytes data = 4; int64 call_token_value = 5; int64 token_id = 6; } calling `transfer(address,uint256)` on
 * one of the devnet's TRC-20 contracts, with no TRX or TRC-10 attached.
 */
function readTrc20Transfer(value: Fields, tokens: DecodeContext['tokens'], feeLimit: bigint) {
  const owner = addressBytes(single(value, 1, 'TriggerSmartContract.owner_address', 'bytes'), 'owner_address');
  const contract = tronAddress(addressBytes(single(value, 2, 'TriggerSmartContract.contract_address', 'bytes'), 'contract_address'));
  const asset = ASSETS.find((candidate) => candidate.chain === 'tron' && candidate.type === 'trc20' && tokens[candidate.id] === contract);
  if (!asset) throw malformed(`contract ${contract} is not one of the devnet's TRC-20 tokens`);
  for (const [field, name] of [[3, 'call_value'], [5, 'call_token_value'], [6, 'token_id']] as const) {
    if ((single(value, field, `TriggerSmartContract.${name}`, 'varint') ?? 0n) !== 0n) throw malformed(`a TRC-20 transfer attaches no ${name}`);
  }
  const data = single(value, 4, 'TriggerSmartContract.data', 'bytes') ?? new Uint8Array();
  if (data.length !== 68 || !equalBytes(data.subarray(0, 4), TRC20_TRANSFER_SELECTOR)) {
    throw malformed('the only contract call the devnet understands is transfer(address,uint256) (selector a9059cbb, 68 bytes of call data)');
  }
  // The TVM reads an address argument as its low 20 bytes; wallets write the word's 12th byte as 0x00
  // (TronWeb) or as the 0x41 prefix (Trust Wallet), so both are accepted, and nothing else above it.
  if (data.subarray(4, 15).some((byte) => byte !== 0) || (data[15] !== 0 && data[15] !== TRON_ADDRESS_PREFIX)) {
    throw malformed('the recipient word of transfer(address,uint256) is not a 20-byte address');
  }
  const to = Uint8Array.of(TRON_ADDRESS_PREFIX, ...data.subarray(16, 36));
  const amount = BigInt(`0x${bytesToHex(data.subarray(36, 68))}`);
  if (amount <= 0n) throw malformed('the token amount must be positive');
  if (feeLimit < 0n) throw malformed('fee_limit cannot be negative');
  return { owner, maxFee: feeLimit, transfer: { position: 'log:0', to: tronAddress(to), assetId: asset.id, amount } };
}

/** The address a 65-byte recoverable signature over `txid` recovers to. */
function signerOf(signature: Uint8Array, txid: Uint8Array): string {
  const invalid = () => new DevnetRejection('invalid_signature', 'the signature is not a valid recoverable secp256k1 signature');
  if (signature.length !== 65) throw invalid();
  const v = signature[64]! >= 27 ? signature[64]! - 27 : signature[64]!;
  if (v !== 0 && v !== 1) throw invalid();
  try {
    const publicKey = secp256k1.Signature.fromCompact(signature.subarray(0, 64)).addRecoveryBit(v).recoverPublicKey(txid);
    return tronRules.addressOf(publicKey.toRawBytes(true));
  } catch {
    throw invalid();
  }
}

function addressBytes(bytes: Uint8Array | undefined, name: string): Uint8Array {
  if (!bytes || bytes.length !== 21 || bytes[0] !== TRON_ADDRESS_PREFIX) throw malformed(`${name} is not a 21-byte Tron address starting 0x41`);
  return bytes;
}

const tronAddress = (bytes: Uint8Array): string => tronBase58.encode(bytes);
