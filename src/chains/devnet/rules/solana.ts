import { equalBytes } from '@noble/curves/abstract/utils';
import { ed25519 } from '@noble/curves/ed25519';
import { base58, base64 } from '@scure/base';
import { ASSETS, type AssetInfo } from '../../../catalogue/service';
import {
  ASSOCIATED_TOKEN_PROGRAM,
  ATA_CREATE_IDEMPOTENT,
  COMPUTE_BUDGET_PROGRAM,
  LAMPORTS_PER_SIGNATURE,
  MAX_COMPUTE_UNIT_LIMIT,
  priorityFeeOf,
  SET_COMPUTE_UNIT_LIMIT,
  SET_COMPUTE_UNIT_PRICE,
  SYSTEM_PROGRAM,
  SYSTEM_TRANSFER,
  TOKEN_PROGRAM,
  TOKEN_TRANSFER_CHECKED,
  associatedTokenAddress,
} from '../../transfers/solana';
import { DevnetRejection, type AccountTransaction, type AccountTransferIntent, type ChainRules, type DecodeContext } from './types';

/**
 * Solana's rules on the legacy transaction wire format: compact-u16 count of 64-byte signatures, then
 * the message (header: required signatures, read-only signed, read-only unsigned; compact-u16 array of
 * 32-byte account keys; recent blockhash; compact-u16 array of instructions, each a program index,
 * account indexes and data). Every required signer signs the message bytes with ed25519; the first
 * signer pays the fee and is the sender, and the txid is the base58 of its signature. Broadcast as base64.
 *
 * Instructions understood: System Program Transfer (SOL), SPL Token TransferChecked (the devnet's mints),
 * Associated Token Account Create / CreateIdempotent (moves nothing: rent is not modelled), and Compute
 * Budget SetComputeUnitLimit / SetComputeUnitPrice (the priority fee). Token accounts are the real
 * associated token accounts (ATAs, program-derived from owner and mint); since the devnet's ledger is
 * keyed by owner, the sender must own the source ATA and the recipient is the account key of the
 * transaction whose ATA is the destination, as wallets name it in a CreateIdempotent beside the transfer.
 */

/** Where fee estimation (src/transactions/estimate.ts) reads the base fee from; the chain's encoding owns it. */
export { LAMPORTS_PER_SIGNATURE };

/** IPv6 MTU minus headers: the largest transaction a Solana node accepts. */
const PACKET_DATA_SIZE = 1232;
/** Compute units an instruction gets when the transaction sets no limit. */
const DEFAULT_INSTRUCTION_COMPUTE_UNITS = 200_000n;

const malformed = (message: string) => new DevnetRejection('malformed', message);

export const solanaRules: ChainRules = {
  chain: 'solana',
  decode: decodeSolanaTransaction,
  addressOf: (publicKey) => base58.encode(publicKey),
};

interface CompiledInstruction {
  programIndex: number;
  accounts: number[];
  data: Uint8Array;
}

interface Message {
  requiredSignatures: number;
  readonlySigned: number;
  readonlyUnsigned: number;
  keys: Uint8Array[];
  instructions: CompiledInstruction[];
}

function decodeSolanaTransaction(raw: string, context: DecodeContext): AccountTransaction {
  let bytes: Uint8Array;
  try {
    bytes = base64.decode(raw);
  } catch {
    throw malformed('a Solana transaction is the base64 of its bytes');
  }
  const { signatures, messageBytes } = readSigned(bytes);
  const message = readMessage(new Reader(messageBytes));
  if (signatures.length !== message.requiredSignatures) {
    throw malformed(`the message requires ${message.requiredSignatures} signatures and the transaction carries ${signatures.length}`);
  }
  signatures.forEach((signature, index) => {
    if (!verifies(signature, messageBytes, message.keys[index]!)) {
      throw new DevnetRejection('invalid_signature', `signature ${index} does not verify for ${base58.encode(message.keys[index]!)}`);
    }
  });

  const interpreter = new Interpreter(message, context.tokens);
  message.instructions.forEach((instruction, index) => interpreter.apply(instruction, index));
  const fee = LAMPORTS_PER_SIGNATURE * BigInt(signatures.length) + interpreter.priorityFee();
  return {
    model: 'account',
    txid: base58.encode(signatures[0]!),
    from: base58.encode(message.keys[0]!),
    nonce: null,
    maxFee: fee,
    feeBid: fee,
    transfers: interpreter.transfers,
    raw,
  };
}

/** The signatures and the message bytes they sign, of a transaction within the packet size. */
function readSigned(bytes: Uint8Array) {
  if (bytes.length > PACKET_DATA_SIZE) throw malformed(`the transaction is ${bytes.length} bytes, over the ${PACKET_DATA_SIZE}-byte limit`);
  const reader = new Reader(bytes);
  const signatures = Array.from({ length: reader.compactU16() }, () => reader.take(64));
  return { signatures, messageBytes: bytes.subarray(reader.offset) };
}

/**
 * The signers of any Solana transaction, legacy or versioned (v0 and later keep the legacy header and
 * static account keys after their version byte, and signers are always static keys), whose signature
 * verifies: the keys that authorised it, fee payer first. A signer whose signature does not verify is
 * left out (the cluster refuses the transaction anyway). Throws DevnetRejection `malformed`.
 */
export function solanaSigners(bytes: Uint8Array): string[] {
  const { signatures, messageBytes } = readSigned(bytes);
  const reader = new Reader(messageBytes);
  if (reader.peek() & 0x80) reader.u8();
  const requiredSignatures = reader.u8();
  reader.take(2); // read-only signed and unsigned counts
  const keys = Array.from({ length: reader.compactU16() }, () => reader.take(32));
  if (signatures.length !== requiredSignatures || requiredSignatures > keys.length) {
    throw malformed(`the message requires ${requiredSignatures} signatures of its ${keys.length} account keys and the transaction carries ${signatures.length}`);
  }
  return signatures.flatMap((signature, index) => (verifies(signature, messageBytes, keys[index]!) ? [base58.encode(keys[index]!)] : []));
}

function verifies(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  try {
    // RFC 8032 strict verification, as the validators' verify_strict.
    return ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}

function readMessage(reader: Reader): Message {
  if (reader.peek() & 0x80) throw malformed('versioned (v0) messages are not supported: send a legacy transaction');
  const requiredSignatures = reader.u8();
  const readonlySigned = reader.u8();
  const readonlyUnsigned = reader.u8();
  const keys = Array.from({ length: reader.compactU16() }, () => reader.take(32));
  reader.take(32); // The recent blockhash: not modelled, the txid must be new instead.
  const instructions = Array.from({ length: reader.compactU16() }, () => ({
    programIndex: reader.u8(),
    accounts: Array.from({ length: reader.compactU16() }, () => reader.u8()),
    data: reader.take(reader.compactU16()),
  }));
  if (!reader.done()) throw malformed('bytes after the last instruction');
  // Solana's own sanitising of a legacy message.
  if (requiredSignatures === 0 || readonlySigned >= requiredSignatures || requiredSignatures + readonlyUnsigned > keys.length) {
    throw malformed('the message header does not fit its account keys (a writable, signing fee payer comes first)');
  }
  if (new Set(keys.map((key) => base58.encode(key))).size !== keys.length) throw malformed('an account key appears twice');
  for (const instruction of instructions) {
    if (instruction.programIndex === 0 || instruction.programIndex >= keys.length) throw malformed('an instruction names no valid program account');
    if (instruction.accounts.some((index) => index >= keys.length)) throw malformed('an instruction names an account index past the account keys');
  }
  return { requiredSignatures, readonlySigned, readonlyUnsigned, keys, instructions };
}

/** Reads the instructions in order: the transfers they make and the compute budget they set. */
class Interpreter {
  readonly transfers: AccountTransferIntent[] = [];
  private computeUnitLimit?: bigint;
  private computeUnitPrice?: bigint;
  private budgetInstructions = 0;

  constructor(
    private readonly message: Message,
    private readonly tokens: DecodeContext['tokens'],
  ) {}

  apply(instruction: CompiledInstruction, index: number) {
    const program = this.message.keys[instruction.programIndex]!;
    if (equalBytes(program, SYSTEM_PROGRAM)) this.systemTransfer(instruction, index);
    else if (equalBytes(program, TOKEN_PROGRAM)) this.tokenTransferChecked(instruction, index);
    else if (equalBytes(program, ASSOCIATED_TOKEN_PROGRAM)) this.createAssociatedTokenAccount(instruction, index);
    else if (equalBytes(program, COMPUTE_BUDGET_PROGRAM)) this.computeBudget(instruction, index);
    else {
      throw malformed(
        `instruction ${index} calls program ${base58.encode(program)}: the devnet understands the System, SPL Token, Associated Token Account and Compute Budget programs`,
      );
    }
  }

  /** The priority fee: compute unit price (micro-lamports) times the compute unit limit, rounded up. */
  priorityFee(): bigint {
    const defaultLimit = DEFAULT_INSTRUCTION_COMPUTE_UNITS * BigInt(this.message.instructions.length - this.budgetInstructions);
    const unitLimit = [this.computeUnitLimit ?? defaultLimit, MAX_COMPUTE_UNIT_LIMIT].reduce((a, b) => (a < b ? a : b));
    return priorityFeeOf({ unitLimit, unitPrice: this.computeUnitPrice ?? 0n });
  }

  /** SystemInstruction::Transfer { lamports: u64 }: u32 2, u64; accounts [from (signer, writable), to (writable)]. */
  private systemTransfer(instruction: CompiledInstruction, index: number) {
    const { data } = instruction;
    const discriminator = data.length >= 4 ? view(data).getUint32(0, true) : -1;
    if (discriminator !== SYSTEM_TRANSFER || data.length !== 12) {
      throw malformed(`instruction ${index}: System Program instruction ${discriminator} is not supported (only Transfer)`);
    }
    const [from, to] = this.accounts(instruction, 2, index);
    this.requireSender(from!, index);
    this.requireWritable(index, from!, to!);
    const amount = positive(view(data).getBigUint64(4, true), index);
    this.transfers.push({ position: `ix:${index}`, to: base58.encode(this.message.keys[to!]!), assetId: 'SOL', amount });
  }

  /** TokenInstruction::TransferChecked { amount: u64, decimals: u8 }: u8 12; accounts [source, mint, destination, owner]. */
  private tokenTransferChecked(instruction: CompiledInstruction, index: number) {
    const { data } = instruction;
    if (data[0] !== TOKEN_TRANSFER_CHECKED || data.length !== 10) {
      throw malformed(`instruction ${index}: SPL Token instruction ${data[0] ?? 'without data'} is not supported (only TransferChecked)`);
    }
    // Accounts after the owner are a multisig owner's signers, or, when the owner signs itself (the fee
    // payer, checked below), references the program ignores (Solana Pay's convention).
    const [source, mint, destination, owner] = this.accounts(instruction, 4, index).map((account) => this.message.keys[account]!);
    this.requireSender(instruction.accounts[3]!, index);
    this.requireWritable(index, instruction.accounts[0]!, instruction.accounts[2]!);
    const asset = this.tokenAsset(mint!, index);
    if (data[9] !== asset.decimals) throw malformed(`instruction ${index}: ${asset.id} has ${asset.decimals} decimals, the transfer says ${data[9]}`);
    if (!equalBytes(source!, associatedTokenAddress(owner!, mint!))) {
      throw malformed(`instruction ${index}: the source is not the sender's associated token account for ${asset.id}`);
    }
    const recipient = this.message.keys.find((key) => equalBytes(associatedTokenAddress(key, mint!), destination!));
    if (!recipient) {
      throw malformed(
        `instruction ${index}: the destination's owner is not among the transaction's accounts; name it (as Associated Token Account CreateIdempotent does) so the devnet can credit it`,
      );
    }
    const amount = positive(view(data).getBigUint64(1, true), index);
    this.transfers.push({ position: `ix:${index}`, to: base58.encode(recipient), assetId: asset.id, amount });
  }

  /** Create (no data or 0) / CreateIdempotent (1); accounts [funder, token account, owner, mint, system program, token program]. */
  private createAssociatedTokenAccount(instruction: CompiledInstruction, index: number) {
    if (instruction.data.length > 1 || (instruction.data[0] ?? 0) > ATA_CREATE_IDEMPOTENT) {
      throw malformed(`instruction ${index}: Associated Token Account instruction ${instruction.data[0]} is not supported (only Create and CreateIdempotent)`);
    }
    const [funder, account, owner, mint, system, token] = this.accounts(instruction, 6, index);
    this.requireSender(funder!, index);
    this.requireWritable(index, funder!, account!);
    const key = (position: number) => this.message.keys[position]!;
    this.tokenAsset(key(mint!), index);
    if (!equalBytes(key(system!), SYSTEM_PROGRAM) || !equalBytes(key(token!), TOKEN_PROGRAM)) {
      throw malformed(`instruction ${index}: the token account must be created with the System and SPL Token programs`);
    }
    if (!equalBytes(key(account!), associatedTokenAddress(key(owner!), key(mint!)))) {
      throw malformed(`instruction ${index}: the account created is not the owner's associated token account`);
    }
  }

  private computeBudget(instruction: CompiledInstruction, index: number) {
    const { data } = instruction;
    this.budgetInstructions += 1;
    if (data[0] === SET_COMPUTE_UNIT_LIMIT && data.length === 5 && this.computeUnitLimit === undefined) {
      this.computeUnitLimit = BigInt(view(data).getUint32(1, true));
    } else if (data[0] === SET_COMPUTE_UNIT_PRICE && data.length === 9 && this.computeUnitPrice === undefined) {
      this.computeUnitPrice = view(data).getBigUint64(1, true);
    } else {
      throw malformed(`instruction ${index}: Compute Budget instruction ${data[0]} is not supported or repeats (SetComputeUnitLimit and SetComputeUnitPrice, once each)`);
    }
  }

  private accounts(instruction: CompiledInstruction, count: number, index: number): number[] {
    if (instruction.accounts.length < count) throw malformed(`instruction ${index} names ${instruction.accounts.length} accounts, it needs ${count}`);
    return instruction.accounts.slice(0, count);
  }

  /** The devnet debits one account per transaction: the fee payer, which signed. */
  private requireSender(account: number, index: number) {
    if (account !== 0) throw malformed(`instruction ${index}: only the fee payer may send in a devnet transaction`);
  }

  private requireWritable(index: number, ...accounts: number[]) {
    const { requiredSignatures, readonlySigned, readonlyUnsigned, keys } = this.message;
    const writable = (account: number) => (account < requiredSignatures ? account < requiredSignatures - readonlySigned : account < keys.length - readonlyUnsigned);
    if (!accounts.every(writable)) throw malformed(`instruction ${index} writes to an account the message marks read-only`);
  }

  private tokenAsset(mint: Uint8Array, index: number): AssetInfo {
    const address = base58.encode(mint);
    const asset = ASSETS.find((candidate) => candidate.chain === 'solana' && candidate.type === 'spl' && this.tokens[candidate.id] === address);
    if (!asset) throw malformed(`instruction ${index}: mint ${address} is not one of the devnet's tokens`);
    return asset;
  }
}

function positive(amount: bigint, index: number): bigint {
  if (amount === 0n) throw malformed(`instruction ${index}: the amount must be positive`);
  return amount;
}

const view = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

class Reader {
  offset = 0;
  constructor(private readonly bytes: Uint8Array) {}

  done = () => this.offset === this.bytes.length;

  peek(): number {
    if (this.done()) throw malformed('the transaction ends early');
    return this.bytes[this.offset]!;
  }

  u8(): number {
    const byte = this.peek();
    this.offset += 1;
    return byte;
  }

  take(length: number): Uint8Array {
    if (this.offset + length > this.bytes.length) throw malformed('the transaction ends early');
    this.offset += length;
    return this.bytes.subarray(this.offset - length, this.offset);
  }

  /** Solana's short_vec length: 1 to 3 bytes, in its shortest form, at most 0xffff. */
  compactU16(): number {
    let value = 0;
    for (let position = 0; position < 3; position++) {
      const byte = this.u8();
      value |= (byte & 0x7f) << (7 * position);
      if (byte < 0x80) {
        if (position > 0 && byte === 0) throw malformed('a compact-u16 length is not in its shortest form');
        if (value > 0xffff) throw malformed('a compact-u16 length overflows');
        return value;
      }
    }
    throw malformed('a compact-u16 length is longer than 3 bytes');
  }
}
