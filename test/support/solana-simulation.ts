import { FailedTransactionMetadata } from 'litesvm';

/** What the test Solana node (solana-node.ts) needs to answer simulateTransaction as Agave does. */

/** simulateTransaction's configuration, as far as the node reads it. */
export interface SimulationConfig {
  encoding?: 'base58' | 'base64';
  sigVerify?: boolean;
  replaceRecentBlockhash?: boolean;
  commitment?: string;
}

/** Where a signed legacy transaction's recent blockhash is: after its signatures, header and account keys (each count < 128). */
export function blockhashOffset(bytes: Uint8Array): number {
  const message = 1 + 64 * bytes[0]!;
  return message + 4 + 32 * bytes[message + 3]!;
}

/**
 * The runtime's error as Agave's RPC writes a TransactionError in JSON: a unit variant as its name
 * (`"AccountNotFound"`), `{"InstructionError": [index, "InsufficientFunds" | {"Custom": code}]}`,
 * `{"InsufficientFundsForRent": {"account_index": n}}`. The names are read from the runtime's own
 * rendering of the error (its Rust Debug form), the numbers from its typed fields.
 */
export function agaveError(failed: FailedTransactionMetadata): unknown {
  const err = failed.err();
  const debug = failed.toString();
  if (typeof err === 'number') return /err: (\w+)/.exec(debug)![1];
  if ('err' in err) {
    const inner = err.err();
    return { InstructionError: [err.index, typeof inner === 'object' && 'code' in inner ? { Custom: inner.code } : /InstructionError\(\d+, (\w+)/.exec(debug)![1]] };
  }
  const name = /err: (\w+)/.exec(debug)![1]!;
  return { [name]: 'accountIndex' in err ? { account_index: err.accountIndex } : err.index };
}
