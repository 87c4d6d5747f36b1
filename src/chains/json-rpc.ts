import { text, z } from '../shared/schemas';
import type { Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import { broadcastSenders, UndecodableBroadcast, type BroadcastSenders } from './broadcast-senders';
import { ChainUnavailableError } from './nodes';
import { NodeUnavailableError, type ChainProvider, type RelayedAnswer, type RelayedCall } from './provider';
import { NodeResponseTooLargeError } from './providers/node-http';
import { BROADCAST_METHODS, heavyParamsRefusal, methodWeight, POSITIONAL_PARAMS_ONLY, RPC_METHOD_ALLOWLIST, type HeavyParamLimits } from './rpc-methods';

/** JSON-RPC 2.0's reserved error codes (https://www.jsonrpc.org/specification#error_object). */
export const JSON_RPC_ERROR = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
} as const;

/**
 * A broadcast whose sender is a custody address: EIP-1474's "Transaction rejected", in the range JSON-RPC
 * 2.0 leaves to the server. Not -32602: the params are valid, the platform refuses what they would do.
 */
export const CUSTODY_SENDER_REFUSED = -32003;

/** EIP-1474's "Limit exceeded": the node's answer was larger than the pass-through reads (CHAIN_NODE_MAX_RESPONSE_BYTES). */
export const LIMIT_EXCEEDED = -32005;

/** A batch holds at most this many calls; a larger one is refused whole with -32600. */
export const MAX_BATCH_CALLS = 100;

type JsonRpcId = string | number | null;
export type JsonRpcResponse =
  | { jsonrpc: '2.0'; id: JsonRpcId; result: unknown }
  | { jsonrpc: '2.0'; id: JsonRpcId; error: { code: number; message: string; data?: unknown } };

const JsonRpcIdSchema = z.union([z.string(), z.number(), z.null()]);
export const JsonRpcRequestSchema = z.object({
  jsonrpc: z.literal('2.0'),
  method: text(1, 128),
  params: z.union([z.array(z.unknown()), z.record(z.string(), z.unknown())]).optional(),
  id: JsonRpcIdSchema.optional().openapi({ description: 'Omitted for a notification, which gets no answer' }),
});

/** One entry of the request after validation: a call to answer (or not, for a notification), or an invalid one. */
type Entry =
  | { kind: 'call'; id: JsonRpcId; notification: boolean; call: RelayedCall }
  | { kind: 'invalid'; id: JsonRpcId };

/** What a pass-through call needs beyond the body: the key's environment, its node, and who holds custody. */
export interface PassThroughContext {
  environment: Environment;
  resolveProvider: () => Promise<ChainProvider>;
  /** The first of the senders that is a custody address of the platform in the environment, or null. */
  custodySender: (senders: BroadcastSenders) => Promise<string | null>;
  /** What a request may ask of the node: its cost budget (RPC_BATCH_MAX_COST) and the bounds on heavy params. */
  limits: HeavyParamLimits & { batchMaxCost: number };
}

/**
 * The JSON-RPC 2.0 pass-through: parses the body itself so that every protocol error is a JSON-RPC
 * error object, refuses what the chain's allowlist does not name and any broadcast spending from a
 * custody address, and relays the rest to the node in one round trip. Answers undefined when nothing
 * is to be answered (notifications only).
 */
export async function passThrough(body: string | undefined, chain: ChainId, context: PassThroughContext): Promise<JsonRpcResponse | JsonRpcResponse[] | undefined> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body ?? '');
  } catch {
    return errorResponse(null, JSON_RPC_ERROR.parseError, 'Parse error: the body is not valid JSON');
  }
  if (Array.isArray(parsed)) {
    if (parsed.length === 0) return errorResponse(null, JSON_RPC_ERROR.invalidRequest, 'Invalid Request: an empty batch');
    if (parsed.length > MAX_BATCH_CALLS) {
      return errorResponse(null, JSON_RPC_ERROR.invalidRequest, `Invalid Request: a batch holds at most ${MAX_BATCH_CALLS} calls`);
    }
    const entries = parsed.map(toEntry);
    const cost = entries.reduce((sum, entry) => sum + (entry.kind === 'call' ? methodWeight(entry.call.method) : 0), 0);
    if (cost > context.limits.batchMaxCost) {
      return errorResponse(
        null,
        JSON_RPC_ERROR.invalidRequest,
        `Invalid Request: a batch costs at most ${context.limits.batchMaxCost} (eth_getLogs 10; eth_call, eth_estimateGas, eth_getBlockBy*, eth_feeHistory and getblock 5; any other call 1), this one ${cost}`,
      );
    }
    const answers = await answer(entries, chain, context);
    return answers.length > 0 ? answers : undefined;
  }
  const [single] = await answer([toEntry(parsed)], chain, context);
  return single;
}

function toEntry(value: unknown): Entry {
  const parsed = JsonRpcRequestSchema.safeParse(value);
  if (!parsed.success) {
    // The id is echoed when it can be read, so the caller can match the refusal to its call.
    const id = typeof value === 'object' && value !== null ? JsonRpcIdSchema.safeParse((value as { id?: unknown }).id) : undefined;
    return { kind: 'invalid', id: id?.success ? id.data : null };
  }
  const { method, params, id } = parsed.data;
  const notification = !Object.hasOwn(value as object, 'id');
  return { kind: 'call', id: id ?? null, notification, call: { method, ...(params === undefined ? {} : { params }) } };
}

/** Answers every entry in order, relaying the allowed calls together; notifications get no answer. */
async function answer(entries: Entry[], chain: ChainId, context: PassThroughContext): Promise<JsonRpcResponse[]> {
  const answers = new Map<Entry, RelayedAnswer>();
  const relayed: Extract<Entry, { kind: 'call' }>[] = [];
  for (const entry of entries) {
    if (entry.kind === 'invalid') continue;
    const refusal = await refuseCall(entry.call, chain, context);
    if (refusal) answers.set(entry, refusal);
    else relayed.push(entry);
  }
  if (relayed.length > 0) {
    const results = await relay(relayed.map((entry) => entry.call), context.resolveProvider);
    relayed.forEach((entry, index) => answers.set(entry, results[index]!));
  }
  return entries.flatMap((entry): JsonRpcResponse[] => {
    if (entry.kind === 'invalid') return [errorResponse(entry.id, JSON_RPC_ERROR.invalidRequest, 'Invalid Request: not a JSON-RPC 2.0 request object')];
    if (entry.notification) return [];
    const result = answers.get(entry)!;
    return ['error' in result ? { jsonrpc: '2.0', id: entry.id, error: result.error } : { jsonrpc: '2.0', id: entry.id, result: result.result }];
  });
}

/** Why a call is answered without reaching the node, or null when it is to be relayed. */
async function refuseCall(call: RelayedCall, chain: ChainId, context: PassThroughContext): Promise<RelayedAnswer | null> {
  const { method, params } = call;
  if (!RPC_METHOD_ALLOWLIST[chain]?.has(method)) {
    return { error: { code: JSON_RPC_ERROR.methodNotFound, message: `Method not found: '${method}' is not available through the ${chain} pass-through` } };
  }
  if (params !== undefined && !Array.isArray(params) && POSITIONAL_PARAMS_ONLY.has(chain)) {
    return { error: { code: JSON_RPC_ERROR.invalidParams, message: `Invalid params: ${chain} methods take positional params (an array)` } };
  }
  const heavy = heavyParamsRefusal(method, params, context.limits);
  if (heavy) return { error: { code: JSON_RPC_ERROR.invalidParams, message: `Invalid params: ${heavy}; nothing was relayed` } };
  return method === BROADCAST_METHODS[chain] ? refuseCustodyBroadcast(call, chain, context) : null;
}

/**
 * A broadcast from a custody address would move funds past the policies, the locks and the ledger: it is
 * answered -32003 naming the route that sends them, and never relayed. Bytes that are no signed
 * transaction of the chain are answered -32602 rather than relayed blind (a node refuses them too).
 */
async function refuseCustodyBroadcast(call: RelayedCall, chain: ChainId, context: PassThroughContext): Promise<RelayedAnswer | null> {
  let senders: BroadcastSenders;
  try {
    senders = await broadcastSenders(chain, context.environment, call);
  } catch (error) {
    if (!(error instanceof UndecodableBroadcast)) throw error;
    return { error: { code: JSON_RPC_ERROR.invalidParams, message: `Invalid params: ${error.message}; nothing was broadcast` } };
  }
  const custody = await context.custodySender(senders);
  if (custody === null) return null;
  return {
    error: {
      code: CUSTODY_SENDER_REFUSED,
      message: `Transaction rejected: it spends from ${custody}, a custody address, whose funds move only through POST /v1/transactions (policies, locks and ledger apply); nothing was broadcast`,
      data: { reason: 'custody_sender', address: custody, use: 'POST /v1/transactions' },
    },
  };
}

/**
 * Relays to the node; when there is no usable node, each call gets -32603 with a message that names no URL,
 * and when the node's answer outgrew the limit, -32005.
 */
async function relay(calls: RelayedCall[], resolveProvider: () => Promise<ChainProvider>): Promise<RelayedAnswer[]> {
  try {
    const provider = await resolveProvider();
    return await provider.relay(calls);
  } catch (error) {
    if (error instanceof NodeResponseTooLargeError) {
      const message = `Limit exceeded: the node's answer is larger than the ${error.limitBytes} bytes the pass-through reads; ask for less (a narrower block range, fewer calls)`;
      return calls.map(() => ({ error: { code: LIMIT_EXCEEDED, message, data: { reason: 'response_too_large', limit_bytes: error.limitBytes } } }));
    }
    if (!(error instanceof ChainUnavailableError || error instanceof NodeUnavailableError)) throw error;
    return calls.map(() => ({ error: { code: JSON_RPC_ERROR.internalError, message: error.message } }));
  }
}

const errorResponse = (id: JsonRpcId, code: number, message: string): JsonRpcResponse => ({ jsonrpc: '2.0', id, error: { code, message } });
