import { z } from 'zod';
import { NodeUnavailableError, type RelayedAnswer } from '../provider';

const JsonRpcErrorObject = z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() });
/** JSON-RPC 1.0 nodes (Bitcoin) send `error: null` beside a result; 2.0 nodes leave it out. */
const NodeResponse = z.object({ id: z.union([z.number(), z.string(), z.null()]), error: JsonRpcErrorObject.nullable().optional() }).loose();
const NodeReply = z.union([NodeResponse, z.array(NodeResponse)]);
type NodeResponse = z.infer<typeof NodeResponse>;

/**
 * A node's reply to `count` calls sent under the ids 0..count-1 (one request, or a batch), as one
 * answer per call in order: its result or the node's own error object, verbatim. A single error
 * answering a batch is the node's refusal of all of it; a call the node left unanswered gets -32603.
 */
export function answersInOrder(reply: unknown, count: number): RelayedAnswer[] {
  const parsed = NodeReply.safeParse(reply);
  if (!parsed.success) throw new NodeUnavailableError('The node sent a reply that is not JSON-RPC.');
  const calls = Array.from({ length: count }, (_, index) => index);
  if (!Array.isArray(parsed.data)) {
    const only = parsed.data;
    return calls.map((index) => (count === 1 || only.error ? toAnswer(only) : missingAnswer(index)));
  }
  const byId = new Map(parsed.data.map((response) => [response.id, response]));
  return calls.map((index) => {
    const response = byId.get(index);
    return response ? toAnswer(response) : missingAnswer(index);
  });
}

function toAnswer(response: NodeResponse): RelayedAnswer {
  if (response.error) return { error: response.error };
  if (!Object.hasOwn(response, 'result')) return { error: { code: -32603, message: 'The node answered with neither a result nor an error.' } };
  return { result: response.result };
}

const missingAnswer = (index: number): RelayedAnswer => ({
  error: { code: -32603, message: `The node sent no answer to call ${index} of the batch.` },
});
