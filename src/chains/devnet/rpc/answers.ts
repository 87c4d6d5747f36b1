import type { RelayedAnswer, RelayedCall } from '../../provider';

/** Shared by each chain's JSON-RPC subset: results, errors and parameters as JSON-RPC spells them. */

export const result = (value: unknown): RelayedAnswer => ({ result: value });
export const rpcError = (code: number, message: string, data?: unknown): RelayedAnswer => ({ error: { code, message, ...(data === undefined ? {} : { data }) } });

export const methodNotFound = (call: RelayedCall, chain: string): RelayedAnswer =>
  rpcError(-32601, `Method not found: '${call.method}' is not answered by the ${chain} devnet (docs/devnet.md lists its methods)`);
export const invalidParams = (message: string): RelayedAnswer => rpcError(-32602, `Invalid params: ${message}`);

/** A parameter by position, or by name when the call passed an object (Bitcoin Core takes both). */
export function param(call: RelayedCall, index: number, name: string): unknown {
  if (Array.isArray(call.params)) return call.params[index];
  return call.params?.[name];
}

/** A JSON-RPC hex quantity: 0x, no leading zeros. */
export const quantity = (value: bigint | number): string => `0x${value.toString(16)}`;

/** A thrown refusal of a parameter, turned into -32602 by `withParams`. */
export class InvalidParams extends Error {}

export async function withParams(answer: () => Promise<RelayedAnswer>): Promise<RelayedAnswer> {
  try {
    return await answer();
  } catch (error) {
    if (error instanceof InvalidParams) return invalidParams(error.message);
    throw error;
  }
}

export function requireString(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new InvalidParams(`${what} must be a string`);
  return value;
}
