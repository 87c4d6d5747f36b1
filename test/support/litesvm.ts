import { base58, base64 } from '@scure/base';
import type { LiteSVM } from 'litesvm';
import { COMPUTE_BUDGET_PROGRAM, SET_COMPUTE_UNIT_PRICE, TOKEN_PROGRAM } from '../../src/chains/transfers/solana';

const COMPUTE_BUDGET_PROGRAM_ID = base58.encode(COMPUTE_BUDGET_PROGRAM);

/**
 * LiteSVM (the Solana runtime in process) as the Solana tests use it: its kit-typed arguments made from
 * the platform's plain forms (base58 addresses, base64 signed transactions), and SPL Token accounts.
 */

export type SvmAddress = Parameters<LiteSVM['getBalance']>[0];
type SvmTransaction = Parameters<LiteSVM['sendTransaction']>[0];
export type SvmAccount = Parameters<LiteSVM['setAccount']>[0];

/** SPL Token's account sizes: a Mint and a token Account. */
export const MINT_SIZE = 82;
export const TOKEN_ACCOUNT_SIZE = 165;

export const svmAddress = (value: string) => value as SvmAddress;

/** The account keys of a signed transaction's legacy message, in order (the fee payer first). */
export function messageAccountKeys(raw: string): string[] {
  const bytes = base64.decode(raw);
  const message = bytes.subarray(1 + 64 * bytes[0]!);
  const count = message[3]!; // < 128 keys: a one-byte compact-u16
  return Array.from({ length: count }, (_, index) => base58.encode(message.subarray(4 + 32 * index, 36 + 32 * index)));
}

/** The instructions of a signed transaction's legacy message, in order: program, accounts and data. */
export function messageInstructions(raw: string): { program: string; accounts: string[]; data: Uint8Array }[] {
  const bytes = base64.decode(raw);
  const message = bytes.subarray(1 + 64 * bytes[0]!);
  const keys = messageAccountKeys(raw);
  // Every count here is below 128: one-byte compact-u16s.
  let at = 4 + 32 * keys.length + 32;
  return Array.from({ length: message[at++]! }, () => {
    const program = keys[message[at++]!]!;
    const accounts = Array.from(message.subarray(at + 1, at + 1 + message[at]!), (index) => keys[index]!);
    at += 1 + accounts.length;
    const data = message.subarray(at + 1, at + 1 + message[at]!);
    at += 1 + data.length;
    return { program, accounts, data };
  });
}

/**
 * Which account keys of a signed transaction's legacy message it writes, from the header: signers
 * first, then the others, each group's read-only keys last. (The runtime also demotes invoked program
 * ids and reserved accounts, which the platform's messages never mark writable.)
 */
export function messageWritable(raw: string): boolean[] {
  const bytes = base64.decode(raw);
  const message = bytes.subarray(1 + 64 * bytes[0]!);
  const [signers, readonlySigned, readonlyUnsigned, count] = [message[0]!, message[1]!, message[2]!, message[3]!];
  return Array.from({ length: count }, (_, index) => (index < signers ? index < signers - readonlySigned : index < count - readonlyUnsigned));
}

/** The price per compute unit (micro-lamports) a signed transaction's SetComputeUnitPrice names; 0 without one. */
export function messageComputeUnitPrice(raw: string): bigint {
  const price = messageInstructions(raw).find(({ program, data }) => program === COMPUTE_BUDGET_PROGRAM_ID && data[0] === SET_COMPUTE_UNIT_PRICE);
  return price ? u64At(price.data, 1) : 0n;
}

/** The signed bytes as the provider's broadcast takes them (base64), handed to the runtime as a transaction: each signature by its signer's key. */
export function runtimeTransaction(raw: string): SvmTransaction {
  const bytes = base64.decode(raw);
  const signers = messageAccountKeys(raw).slice(0, bytes[0]!);
  const signatures = Object.fromEntries(signers.map((signer, index) => [signer, bytes.subarray(1 + 64 * index, 65 + 64 * index)]));
  return { messageBytes: bytes.subarray(1 + 64 * signers.length), signatures } as unknown as SvmTransaction;
}

export function u64At(data: Pick<Uint8Array, 'buffer' | 'byteOffset' | 'byteLength'>, offset: number): bigint {
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(offset, true);
}

export function u64(value: bigint): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, value, true);
  return bytes;
}

/** SPL Token's Mint layout: mint authority (COption<Pubkey>), supply, decimals, initialized, freeze authority (none). */
export function mintData(authority: string, supply: bigint, decimals: number): Uint8Array {
  const data = new Uint8Array(MINT_SIZE);
  data.set([1, 0, 0, 0], 0);
  data.set(base58.decode(authority), 4);
  data.set(u64(supply), 36);
  data[44] = decimals;
  data[45] = 1;
  return data;
}

/** SPL Token's Account layout: mint, owner, amount, no delegate, Initialized, not native, no close authority. */
export function tokenAccountData(mint: string, owner: string, amount: bigint): Uint8Array {
  const data = new Uint8Array(TOKEN_ACCOUNT_SIZE);
  data.set(base58.decode(mint), 0);
  data.set(base58.decode(owner), 32);
  data.set(u64(amount), 64);
  data[108] = 1;
  return data;
}

/** A rent-exempt account of the SPL Token program (or `program`: Token-2022) holding `data` (a mint, a token account). */
export function putTokenProgramAccount(svm: LiteSVM, address: string, data: Uint8Array, program = base58.encode(TOKEN_PROGRAM)): void {
  svm.setAccount({
    address: svmAddress(address),
    lamports: svm.minimumBalanceForRentExemption(BigInt(data.length)),
    data,
    programAddress: svmAddress(program),
    executable: false,
  } as unknown as SvmAccount);
}
