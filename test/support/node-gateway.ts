import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { keccak256, type Hex } from 'viem';

/** What the gateway answers one broadcast with instead of the node's answer. */
export interface GatewayAnswer {
  status: number;
  error: { code: number; message: string };
  /** Whether the bytes still reach the node (another node behind the gateway took them). */
  forward: boolean;
  /** Whether lookups of the transaction then answer null (they reach a node behind the gateway that never saw it), until `hidden` is cleared. */
  hide?: boolean;
}

/**
 * A JSON-RPC gateway in front of an EVM node, as a provider's load balancer is: it relays every call, save
 * the next broadcasts it was told to answer itself, and (while a hash is hidden) answers null for that
 * transaction, as a node behind it that never saw the bytes does.
 */
export interface NodeGateway {
  url: string;
  /** The next broadcast gets `answer`. */
  answerNextBroadcast: (answer: GatewayAnswer) => void;
  /** Broadcasts the gateway answered itself, with the hash of their bytes. */
  answered: Hex[];
  hidden: Set<string>;
  close: () => Promise<void>;
}

const HIDDEN_LOOKUPS = new Set(['eth_getTransactionByHash', 'eth_getTransactionReceipt']);

export async function startNodeGateway(nodeUrl: string): Promise<NodeGateway> {
  const queued: GatewayAnswer[] = [];
  const answered: Hex[] = [];
  const hidden = new Set<string>();
  const relay = async (body: string) => {
    const response = await fetch(nodeUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return { status: response.status, text: await response.text() };
  };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const parsed = JSON.parse(body) as { id?: unknown; method?: string; params?: unknown[] } | unknown[];
        const single = Array.isArray(parsed) ? null : parsed;
        let reply: { status: number; text: string };
        if (single?.method === 'eth_sendRawTransaction' && queued.length > 0) {
          const answer = queued.shift()!;
          const hash = keccak256(single.params![0] as Hex);
          answered.push(hash);
          if (answer.hide) hidden.add(hash.toLowerCase());
          if (answer.forward) await relay(body);
          reply = { status: answer.status, text: JSON.stringify({ jsonrpc: '2.0', id: single.id ?? null, error: answer.error }) };
        } else if (single && HIDDEN_LOOKUPS.has(single.method ?? '') && hidden.has(String(single.params?.[0]).toLowerCase())) {
          reply = { status: 200, text: JSON.stringify({ jsonrpc: '2.0', id: single.id ?? null, result: null }) };
        } else {
          reply = await relay(body);
        }
        response.writeHead(reply.status, { 'content-type': 'application/json' });
        response.end(reply.text);
      })().catch((error: unknown) => {
        response.writeHead(502);
        response.end(String(error));
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    answerNextBroadcast: (answer) => queued.push(answer),
    answered,
    hidden,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
