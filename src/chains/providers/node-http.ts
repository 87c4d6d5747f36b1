import { NodeUnavailableError, type RelayedAnswer, type RelayedCall } from '../provider';
import { answersInOrder } from './node-replies';

/** What one call to a chain node may take: its time (CHAIN_NODE_TIMEOUT_MS) and the size of its answer (CHAIN_NODE_MAX_RESPONSE_BYTES). */
export interface NodeCallLimits {
  timeoutMs: number;
  maxResponseBytes: number;
}

/** The node's answer outgrew CHAIN_NODE_MAX_RESPONSE_BYTES: the rest was never read. */
export class NodeResponseTooLargeError extends NodeUnavailableError {
  override name = 'NodeResponseTooLargeError';
  constructor(readonly limitBytes: number) {
    super(`The node's answer is larger than ${limitBytes} bytes; it was abandoned unread.`);
  }
}

/**
 * fetch for node calls. A redirect is refused, never followed: a node URL is configured, and a
 * redirect could point the call (and its credentials) anywhere. The body is read as it arrives and
 * abandoned past `maxResponseBytes`, so a huge answer costs at most that much memory. Answers a
 * Response of the bytes read, which viem's transport can take as its fetchFn.
 */
export async function nodeFetch(input: string | URL | Request, init: RequestInit, maxResponseBytes: number): Promise<Response> {
  const response = await fetch(input, { ...init, redirect: 'manual' });
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel();
    throw new NodeUnavailableError(`The node answered HTTP ${response.status}, a redirect, which node calls never follow.`);
  }
  const declared = Number(response.headers.get('content-length'));
  if (declared > maxResponseBytes) {
    await response.body?.cancel();
    throw new NodeResponseTooLargeError(maxResponseBytes);
  }
  const chunks: Uint8Array[] = [];
  let received = 0;
  if (response.body) {
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      received += value.byteLength;
      if (received > maxResponseBytes) {
        await reader.cancel();
        throw new NodeResponseTooLargeError(maxResponseBytes);
      }
      chunks.push(value);
    }
  }
  return new Response(Buffer.concat(chunks), { status: response.status, statusText: response.statusText, headers: response.headers });
}

/**
 * POSTs a JSON-RPC payload to the node within `limits`; answers the HTTP status and the body's text.
 * Every failure is a NodeUnavailableError whose message names no URL (it may hold a provider's key).
 */
export async function postToNode(url: string, payload: unknown, limits: NodeCallLimits, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  try {
    const response = await nodeFetch(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
        body: JSON.stringify(payload),
        signal: AbortSignal.timeout(limits.timeoutMs),
      },
      limits.maxResponseBytes,
    );
    return { status: response.status, text: await response.text() };
  } catch (error) {
    if (error instanceof NodeUnavailableError) throw error;
    const timedOut = (error as Error).name === 'TimeoutError';
    throw new NodeUnavailableError(timedOut ? `The node did not answer within ${limits.timeoutMs} ms.` : 'The node could not be reached.');
  }
}

/** A node's body as JSON; one that is not is the node's being unusable. */
export function parseNodeBody(reply: { status: number; text: string }): unknown {
  try {
    return JSON.parse(reply.text) as unknown;
  } catch {
    throw new NodeUnavailableError(`The node answered HTTP ${reply.status} without a JSON-RPC body.`);
  }
}

/**
 * Relays calls to a JSON-RPC 2.0 node in one round trip (a batch when more than one) under the service's
 * own ids (the call's index: a caller's ids may repeat within a batch, and notifications have none),
 * answered in order.
 */
export async function relayJsonRpc2(url: string, calls: RelayedCall[], limits: NodeCallLimits): Promise<RelayedAnswer[]> {
  return (await relayJsonRpc2WithStatus(url, calls, limits)).answers;
}

/** relayJsonRpc2, with the HTTP status the answers came under: a refusal proves something only when the node itself answered it (src/chains/refusals.ts). */
export async function relayJsonRpc2WithStatus(url: string, calls: RelayedCall[], limits: NodeCallLimits): Promise<{ status: number; answers: RelayedAnswer[] }> {
  const requests = calls.map((call, index) => ({ jsonrpc: '2.0', id: index, method: call.method, ...(call.params === undefined ? {} : { params: call.params }) }));
  const reply = await postToNode(url, requests.length === 1 ? requests[0] : requests, limits);
  return { status: reply.status, answers: answersInOrder(parseNodeBody(reply), calls.length) };
}
