import { equalBytes } from '@noble/curves/abstract/utils';
import { base58 } from '@scure/base';
import { ASSOCIATED_TOKEN_PROGRAM, COMPUTE_BUDGET_PROGRAM, SYSTEM_PROGRAM, SYSTEM_TRANSFER, TOKEN_PROGRAM, associatedTokenAddress } from '../../chains/transfers/solana';
import type { DecodedSignedPayload } from './types';

/**
 * A Solana message (legacy or v0), which ed25519 keys sign as it is: the one instruction that moves
 * or approves value is read (System Transfer; SPL Token Transfer, TransferChecked, Approve,
 * ApproveChecked, of the Token or Token-2022 program). Compute Budget, Memo and Associated Token
 * Account creations beside it move nothing worth judging (an account's rent); any other program, or
 * two value instructions, leave the message's destination and value unknown. Bytes that are no
 * message decode to null.
 */

const TOKEN_2022_PROGRAM = base58.decode('TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb');
const MEMO_PROGRAMS = ['MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr', 'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo'].map((key) => base58.decode(key));
const PASSIVE_PROGRAMS = [COMPUTE_BUDGET_PROGRAM, ASSOCIATED_TOKEN_PROGRAM, ...MEMO_PROGRAMS];
const TOKEN = { transfer: 3, approve: 4, transferChecked: 12, approveChecked: 13 } as const;

interface Instruction {
  program: Uint8Array | undefined;
  /** Account keys; undefined for one loaded from an address lookup table (v0), which the message does not spell. */
  accounts: (Uint8Array | undefined)[];
  data: Uint8Array;
}

export function decodeSolanaMessage(bytes: Uint8Array): DecodedSignedPayload | null {
  const message = readMessage(bytes);
  if (!message) return null;
  const valued = message.instructions.filter((instruction) => !PASSIVE_PROGRAMS.some((program) => instruction.program && equalBytes(program, instruction.program)));
  const effect = valued.length === 1 ? readInstruction(valued[0]!, message.keys) : null;
  return { kind: 'solana_message', ...effect };
}

type Effect = Omit<DecodedSignedPayload, 'kind'>;

function readInstruction({ program, accounts, data }: Instruction, keys: Uint8Array[]): Effect | null {
  if (!program) return null;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const key = (index: number) => {
    const account = accounts[index];
    return account ? base58.encode(account) : undefined;
  };
  if (equalBytes(program, SYSTEM_PROGRAM)) {
    if (data.length !== 12 || view.getUint32(0, true) !== SYSTEM_TRANSFER || accounts.length < 2) return null;
    return { ...destination(key(1)), asset: { native: true }, amount: view.getBigUint64(4, true) };
  }
  if (!equalBytes(program, TOKEN_PROGRAM) && !equalBytes(program, TOKEN_2022_PROGRAM)) return null;
  const checked = data[0] === TOKEN.transferChecked || data[0] === TOKEN.approveChecked;
  if (data.length !== (checked ? 10 : 9) || accounts.length < (checked ? 4 : 3)) return null;
  const amount = view.getBigUint64(1, true);
  const mint = checked ? key(1) : undefined;
  const asset = mint ? { asset: { contract: mint } } : {};
  const target = checked ? 2 : 1;
  switch (data[0]) {
    case TOKEN.transfer:
    case TOKEN.transferChecked:
      return { ...destination(ownerOf(accounts[target], accounts[1], keys) ?? key(target)), ...asset, amount };
    case TOKEN.approve:
    case TOKEN.approveChecked: {
      const spender = key(target);
      return { ...destination(spender), ...(spender ? { spender } : {}), ...asset, amount };
    }
    default:
      return null;
  }
}

const destination = (address: string | undefined) => (address ? { destination: address } : {});

/** The wallet whose associated token account (of `mint`) `tokenAccount` is, when the message names it (as a CreateIdempotent beside the transfer does). */
function ownerOf(tokenAccount: Uint8Array | undefined, mint: Uint8Array | undefined, keys: Uint8Array[]): string | undefined {
  if (!tokenAccount || !mint) return undefined;
  const owner = keys.find((key) => equalBytes(associatedTokenAddress(key, mint), tokenAccount));
  return owner ? base58.encode(owner) : undefined;
}

/** Legacy: header, account keys, recent blockhash, instructions. v0: a version byte first, address table lookups last. */
function readMessage(bytes: Uint8Array): { keys: Uint8Array[]; instructions: Instruction[] } | null {
  let offset = 0;
  const take = (length: number) => {
    if (offset + length > bytes.length) throw new RangeError('truncated');
    return bytes.subarray(offset, (offset += length));
  };
  const compactU16 = () => {
    let value = 0;
    for (let shift = 0; shift < 21; shift += 7) {
      const byte = take(1)[0]!;
      value |= (byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
    throw new RangeError('compact-u16 too long');
  };
  try {
    const versioned = (bytes[0] ?? 0) & 0x80;
    if (versioned && take(1)[0] !== 0x80) return null;
    const [signatures] = take(3);
    const keys = Array.from({ length: compactU16() }, () => take(32));
    if (!signatures || signatures > keys.length) return null;
    take(32);
    const compiled = Array.from({ length: compactU16() }, () => ({ program: take(1)[0]!, accounts: [...take(compactU16())], data: take(compactU16()) }));
    let loaded = 0;
    if (versioned) {
      for (let lookups = compactU16(); lookups > 0; lookups--) {
        take(32);
        loaded += take(compactU16()).length;
        loaded += take(compactU16()).length;
      }
    }
    if (offset !== bytes.length) return null;
    const account = (index: number) => keys[index];
    if (compiled.some((instruction) => [instruction.program, ...instruction.accounts].some((index) => index >= keys.length + loaded))) return null;
    return { keys, instructions: compiled.map(({ program, accounts, data }) => ({ program: account(program), accounts: accounts.map(account), data })) };
  } catch (error) {
    if (error instanceof RangeError) return null;
    throw error;
  }
}
