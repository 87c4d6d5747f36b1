import { equalBytes } from '@noble/curves/abstract/utils';
import { ed25519 } from '@noble/curves/ed25519';
import { sha256 } from '@noble/hashes/sha256';
import { concatBytes } from '@noble/hashes/utils';
import { base58, base64 } from '@scure/base';
import { errors } from '../../shared/errors';
import type { CheckedTransfer, SignedTransfer, SigningKey } from './index';

/**
 * Solana's legacy transaction: compact-u16 count of 64-byte ed25519 signatures, then the message
 * (header; account keys; recent blockhash; instructions). The first signer pays the fee; the txid is the
 * base58 of its signature; broadcast as base64. The devnet's rules (src/chains/devnet/rules/solana.ts)
 * read what is written here.
 */

/** How many blocks past its recent blockhash's a transaction can still land (Solana's lastValidBlockHeight): after that it never will. */
export const SOLANA_BLOCKHASH_VALID_BLOCKS = 150;
/**
 * The rent-exempt minimum of a token account (165 bytes): what an SPL transfer pays, besides its fee,
 * when it creates the recipient's associated token account. It leaves the sender with the transfer.
 */
export const SOLANA_TOKEN_ACCOUNT_RENT = 2_039_280n;
/** The base fee: lamports per signature. */
export const LAMPORTS_PER_SIGNATURE = 5000n;
export const SYSTEM_PROGRAM = base58.decode('11111111111111111111111111111111');
export const TOKEN_PROGRAM = base58.decode('TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA');
export const ASSOCIATED_TOKEN_PROGRAM = base58.decode('ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL');
export const COMPUTE_BUDGET_PROGRAM = base58.decode('ComputeBudget111111111111111111111111111111');
/** Instruction discriminators: SystemInstruction::Transfer (u32), TokenInstruction::TransferChecked, ATA CreateIdempotent, ComputeBudget. */
export const SYSTEM_TRANSFER = 2;
export const TOKEN_TRANSFER_CHECKED = 12;
export const ATA_CREATE_IDEMPOTENT = 1;
export const SET_COMPUTE_UNIT_LIMIT = 2;
export const SET_COMPUTE_UNIT_PRICE = 3;
export const MICRO_LAMPORTS_PER_LAMPORT = 1_000_000n;
const U64_MAX = (1n << 64n) - 1n;
/**
 * The compute unit limit of a transfer whose fee terms name no budget (the devnet's, and sends planned
 * before budgets were simulated), and of one whose simulation the node could not run: enough for a
 * token account creation and a TransferChecked (~14k units, more with a long bump search) with room,
 * and 1/5 of a million, so a whole-lamport priority fee is a whole price in micro-lamports: price = 5 x
 * fee, and the chain charges exactly the fee.
 */
export const PRIORITY_COMPUTE_UNIT_LIMIT = 200_000n;
/** The most compute units a transaction may use (MAX_COMPUTE_UNIT_LIMIT). */
export const MAX_COMPUTE_UNIT_LIMIT = 1_400_000n;
/** Solana Pay's reference: a read-only key named by the transfer instruction, which programs ignore. */
const REFERENCE_DOMAIN = 'custody-platform transfer reference:';
/** A placeholder signature and blockhash: a simulation with sigVerify false and replaceRecentBlockhash reads neither. */
const UNSIGNED = new Uint8Array(64);
const ANY_BLOCKHASH = new Uint8Array(32);

/** What a transfer's Compute Budget instructions set: at most `unitLimit` compute units at `unitPrice` micro-lamports each. */
export interface SolanaComputeBudget {
  unitLimit: bigint;
  unitPrice: bigint;
}

/** The priority fee a budget costs, as the runtime charges it: price x limit in micro-lamports, rounded up to whole lamports. */
export const priorityFeeOf = ({ unitLimit, unitPrice }: SolanaComputeBudget): bigint => (unitPrice * unitLimit + MICRO_LAMPORTS_PER_LAMPORT - 1n) / MICRO_LAMPORTS_PER_LAMPORT;

/**
 * A SOL System transfer, or an SPL TransferChecked between associated token accounts after an
 * Associated Token Account CreateIdempotent for the recipient (as wallets send them). Fee terms with a
 * compute budget (a live node's simulation) put SetComputeUnitLimit and SetComputeUnitPrice first, as
 * the budget says, and must cost exactly the fee; without one, a fee above the base fee prices exactly
 * the difference at PRIORITY_COMPUTE_UNIT_LIMIT. The transfer instruction also names a reference key
 * derived from `reference` (the Solana Pay convention): the message, so the signature and txid, differ
 * between transfers with identical terms.
 */
export function signSolanaTransfer(checked: CheckedTransfer, keys: SigningKey[]): SignedTransfer {
  const { transfer } = checked;
  if (transfer.fee.model !== 'flat') throw errors.validation('A Solana transfer takes flat fee terms.', 'fee');
  if (!transfer.recentBlock) throw errors.validation('A Solana transfer needs a recent blockhash (recentBlock).', 'recent_block');
  const blockhash = solanaKey(transfer.recentBlock.hash, 'recent_block');
  const priority = transfer.fee.fee - LAMPORTS_PER_SIGNATURE;
  if (priority < 0n) throw errors.validation(`A Solana transfer pays at least ${LAMPORTS_PER_SIGNATURE} lamports.`, 'fee');
  const { computeBudget } = transfer.fee;
  if (computeBudget) {
    if (computeBudget.unitLimit <= 0n || computeBudget.unitLimit > MAX_COMPUTE_UNIT_LIMIT || computeBudget.unitPrice > U64_MAX) {
      throw errors.validation(`The compute unit limit must be between 1 and ${MAX_COMPUTE_UNIT_LIMIT}, the price a u64.`, 'fee');
    }
    if (priorityFeeOf(computeBudget) !== priority) throw errors.validation('The compute budget does not cost the priority fee the fee terms name.', 'fee');
  }
  const key = keys[0]!;
  const budget = computeBudget ?? (priority > 0n ? { unitLimit: PRIORITY_COMPUTE_UNIT_LIMIT, unitPrice: (priority * MICRO_LAMPORTS_PER_LAMPORT) / PRIORITY_COMPUTE_UNIT_LIMIT } : null);
  return signSolanaInstructions(key, transferInstructions(checked, key.publicKey, budget), blockhash);
}

/**
 * The transfer as simulateTransaction takes it (base64, with sigVerify false and replaceRecentBlockhash):
 * the instructions it is signed with, its budget at the most units a transaction may use and no price
 * (the same instructions, so the same units, at the base fee), a placeholder signature and blockhash.
 * With the accounts it writes: what its priority fee is read for (getRecentPrioritizationFees).
 */
export function unsignedSolanaTransfer(checked: CheckedTransfer): { raw: string; writableAccounts: string[] } {
  const payer = solanaKey(checked.transfer.from, 'from');
  const instructions = transferInstructions(checked, payer, { unitLimit: MAX_COMPUTE_UNIT_LIMIT, unitPrice: 0n });
  const { message, writable } = compileMessage(payer, instructions, ANY_BLOCKHASH);
  return { raw: base64.encode(concatBytes(compactU16(1), UNSIGNED, message)), writableAccounts: writable.map((key) => base58.encode(key)) };
}

function transferInstructions({ transfer, asset, to, token }: CheckedTransfer, payer: Uint8Array, budget: SolanaComputeBudget | null): InstructionSpec[] {
  if (transfer.amount > U64_MAX) throw errors.validation('The amount must fit a u64.', 'amount');
  const recipient = solanaKey(to, 'to');
  const reference = sha256(new TextEncoder().encode(`${REFERENCE_DOMAIN}${transfer.reference}`));
  const amount = u64(transfer.amount);
  const instructions: InstructionSpec[] = [];
  if (budget) {
    instructions.push(
      { program: COMPUTE_BUDGET_PROGRAM, accounts: [], data: concatBytes(Uint8Array.of(SET_COMPUTE_UNIT_LIMIT), u32(budget.unitLimit)) },
      { program: COMPUTE_BUDGET_PROGRAM, accounts: [], data: concatBytes(Uint8Array.of(SET_COMPUTE_UNIT_PRICE), u64(budget.unitPrice)) },
    );
  }
  if (!token) {
    instructions.push({
      program: SYSTEM_PROGRAM,
      accounts: [signer(payer), writable(recipient), readonly(reference)],
      data: concatBytes(Uint8Array.of(SYSTEM_TRANSFER, 0, 0, 0), amount),
    });
    return instructions;
  }
  const mint = solanaKey(token, 'token_address');
  const destination = associatedTokenAddress(recipient, mint);
  instructions.push(
    {
      program: ASSOCIATED_TOKEN_PROGRAM,
      accounts: [signer(payer), writable(destination), readonly(recipient), readonly(mint), readonly(SYSTEM_PROGRAM), readonly(TOKEN_PROGRAM)],
      data: Uint8Array.of(ATA_CREATE_IDEMPOTENT),
    },
    {
      program: TOKEN_PROGRAM,
      accounts: [writable(associatedTokenAddress(payer, mint)), readonly(mint), writable(destination), signer(payer), readonly(reference)],
      data: concatBytes(Uint8Array.of(TOKEN_TRANSFER_CHECKED), amount, Uint8Array.of(asset.decimals)),
    },
  );
  return instructions;
}

/** A legacy transaction of `instructions` on `recentBlockhash`, paid and signed by `key`, and signed by each of `cosigners` its instructions name as signers. */
export function signSolanaInstructions(key: SigningKey, instructions: InstructionSpec[], recentBlockhash: Uint8Array, cosigners: SigningKey[] = []): SignedTransfer {
  const { message, signers } = compileMessage(key.publicKey, instructions, recentBlockhash);
  const signatures = signers.map((signer) => {
    const signing = [key, ...cosigners].find((candidate) => equalBytes(candidate.publicKey, signer));
    if (!signing) throw errors.validation(`No key signs for ${base58.encode(signer)}.`, 'keys');
    return ed25519.sign(message, signing.privateKey);
  });
  return { raw: base64.encode(concatBytes(compactU16(signatures.length), ...signatures, message)), txid: base58.encode(signatures[0]!) };
}

interface AccountMeta {
  key: Uint8Array;
  signer: boolean;
  writable: boolean;
}
export interface InstructionSpec {
  program: Uint8Array;
  accounts: AccountMeta[];
  data: Uint8Array;
}

export const signer = (key: Uint8Array): AccountMeta => ({ key, signer: true, writable: true });
export const writable = (key: Uint8Array): AccountMeta => ({ key, signer: false, writable: true });
export const readonly = (key: Uint8Array): AccountMeta => ({ key, signer: false, writable: false });

/** The legacy message, keys deduplicated and ordered payer, signers, writable, read-only, as web3.js compiles them; the keys that sign it, in order, and those it writes. */
function compileMessage(payer: Uint8Array, instructions: InstructionSpec[], recentBlockhash: Uint8Array): { message: Uint8Array; signers: Uint8Array[]; writable: Uint8Array[] } {
  const metas = new Map<string, AccountMeta>();
  for (const meta of [signer(payer), ...instructions.flatMap((instruction) => [...instruction.accounts, readonly(instruction.program)])]) {
    const id = base58.encode(meta.key);
    const known = metas.get(id);
    metas.set(id, known ? { key: meta.key, signer: known.signer || meta.signer, writable: known.writable || meta.writable } : meta);
  }
  const rank = (meta: AccountMeta) => (meta.signer ? 0 : 2) + (meta.writable ? 0 : 1);
  const ordered = [...metas.values()].map((meta, order) => ({ meta, order })).sort((a, b) => rank(a.meta) - rank(b.meta) || a.order - b.order);
  const keys = ordered.map(({ meta }) => meta);
  const indexOf = (key: Uint8Array) => keys.findIndex((meta) => equalBytes(meta.key, key));
  const header = Uint8Array.of(
    keys.filter((meta) => meta.signer).length,
    keys.filter((meta) => meta.signer && !meta.writable).length,
    keys.filter((meta) => !meta.signer && !meta.writable).length,
  );
  const message = concatBytes(
    header,
    compactU16(keys.length),
    ...keys.map((meta) => meta.key),
    recentBlockhash,
    compactU16(instructions.length),
    ...instructions.map((instruction) =>
      concatBytes(
        Uint8Array.of(indexOf(instruction.program)),
        compactU16(instruction.accounts.length),
        Uint8Array.from(instruction.accounts.map((meta) => indexOf(meta.key))),
        compactU16(instruction.data.length),
        instruction.data,
      ),
    ),
  );
  return { message, signers: keys.filter((meta) => meta.signer).map((meta) => meta.key), writable: keys.filter((meta) => meta.writable).map((meta) => meta.key) };
}

const PDA_MARKER = new TextEncoder().encode('ProgramDerivedAddress');

/** findProgramAddress([owner, token program, mint], associated token program): the first bump, from 255 down, off the curve. SPL Token's unless `tokenProgram` says (Token-2022). */
export function associatedTokenAddress(owner: Uint8Array, mint: Uint8Array, tokenProgram = TOKEN_PROGRAM): Uint8Array {
  for (let bump = 255; bump >= 0; bump--) {
    const candidate = sha256(concatBytes(owner, tokenProgram, mint, Uint8Array.of(bump), ASSOCIATED_TOKEN_PROGRAM, PDA_MARKER));
    if (!isOnCurve(candidate)) return candidate;
  }
  throw new Error('no associated token address off the curve');
}

/** The associated token account of `owner` for `mint` (both base58), as spl-associated-token-account derives it. */
export const associatedTokenAccount = (owner: string, mint: string): string => base58.encode(associatedTokenAddress(base58.decode(owner), base58.decode(mint)));

/**
 * Whether 32 bytes decompress to an ed25519 point. curve25519-dalek, which Solana uses, also accepts the
 * non-canonical encodings (y ≥ p) that noble refuses; a sha256 output is one with probability ~2^-250.
 */
function isOnCurve(bytes: Uint8Array): boolean {
  try {
    ed25519.ExtendedPoint.fromHex(bytes);
    return true;
  } catch {
    return false;
  }
}

function solanaKey(address: string, param: string): Uint8Array {
  let key: Uint8Array | undefined;
  try {
    key = base58.decode(address);
  } catch {
    key = undefined;
  }
  if (key?.length !== 32) throw errors.validation(`'${address}' is not 32 bytes in base58.`, param);
  return key;
}

/**
 * The recent blockhash a signed transaction (base64, legacy or versioned) names: after its
 * signatures, the message's header (a version byte first when versioned) and its static account keys.
 */
export function solanaRecentBlockhash(raw: string): string {
  const bytes = base64.decode(raw);
  let offset = 0;
  const compactU16At = () => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = bytes[offset++]!;
      value |= (byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
  };
  const signatures = compactU16At();
  offset += 64 * signatures;
  if (bytes[offset]! & 0x80) offset += 1;
  offset += 3;
  const keys = compactU16At();
  offset += 32 * keys;
  if (offset + 32 > bytes.length) throw new Error('a Solana transaction shorter than its recent blockhash');
  return base58.encode(bytes.subarray(offset, offset + 32));
}

/** Solana's short_vec length. */
function compactU16(value: number): Uint8Array {
  const out: number[] = [];
  for (; value >= 0x80; value >>= 7) out.push((value & 0x7f) | 0x80);
  out.push(value);
  return Uint8Array.from(out);
}

function u64(value: bigint): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, value, true);
  return bytes;
}

function u32(value: bigint): Uint8Array {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, Number(value), true);
  return bytes;
}
