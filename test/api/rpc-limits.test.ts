import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOrm, type Orm } from '../../src/db/orm';
import { startAnvil, type Anvil } from '../support/anvil';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';

const rpc = (method: string, params: unknown[] = [], id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params });

describe('JSON-RPC pass-through limits', () => {
  describe('heavy params and the batch budget, on a real anvil', () => {
    let anvil: Anvil;
    let app: TestApp;
    let organization: TestOrganization;

    before(async () => {
      anvil = await startAnvil();
      app = await startTestApp({ config: { CHAIN_NODE_ETHEREUM_SANDBOX: anvil.url, CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID: '31337' } });
      organization = await createTestOrganization('RPC limits');
      await anvil.call('anvil_mine', ['0x5']);
    });
    after(async () => {
      await app?.close();
      await anvil?.stop();
    });

    const call = (body: unknown, chain = 'ethereum') => app.request('POST', `/v1/rpc/${chain}`, { key: organization.secret, body });

    it('relays an eth_getLogs over at most 1,000 numbered blocks or one blockHash; refuses a wider range, a tag and an open end with -32602', async () => {
      const within = await call(rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x3e7' }], 1));
      assert.deepEqual(within.body, { jsonrpc: '2.0', id: 1, result: [] }, "anvil's own answer");
      const latest = (await anvil.call('eth_getBlockByNumber', ['latest', false])) as { hash: string };
      const byHash = await call(rpc('eth_getLogs', [{ blockHash: latest.hash }], 2));
      assert.deepEqual(byHash.body.result, []);

      const refused = [
        { fromBlock: '0x0', toBlock: '0x3e8' },
        { fromBlock: '0x0', toBlock: 'latest' },
        { fromBlock: '0x1' },
        {},
        { blockHash: latest.hash, fromBlock: '0x0', toBlock: '0x1' },
        { fromBlock: '0x5', toBlock: '0x1' },
      ];
      for (const filter of refused) {
        const answer = await call(rpc('eth_getLogs', [filter], 'logs'));
        assert.equal(answer.status, 200);
        assert.equal(answer.body.id, 'logs');
        assert.equal(answer.body.error.code, -32602, JSON.stringify(filter));
        assert.match(answer.body.error.message, /^Invalid params: eth_getLogs .*; nothing was relayed$/);
      }
      const wide = await call(rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x3e8' }]));
      assert.match(wide.body.error.message, /at most 1000 blocks; this filter covers 1001/);
    });

    it('refuses a batch over the cost budget whole with -32600 (11 eth_getLogs weigh 110), relays one within it (10 eth_getLogs, 100 cheap calls)', async () => {
      const logs = (count: number) => Array.from({ length: count }, (_, index) => rpc('eth_getLogs', [{ fromBlock: '0x0', toBlock: '0x1' }], index));
      const over = await call(logs(11));
      assert.equal(over.status, 200);
      assert.equal(over.body.id, null);
      assert.equal(over.body.error.code, -32600);
      assert.match(over.body.error.message, /a batch costs at most 100 .* this one 110$/);
      const heavy = await call([...logs(10), rpc('eth_chainId', [], 'extra')]);
      assert.equal(heavy.body.error.code, -32600, 'eth_getLogs 100 plus one call is over the budget');

      const full = await call(logs(10));
      assert.equal(full.body.length, 10);
      assert.ok(full.body.every((answer: { result?: unknown }) => Array.isArray(answer.result)));
      const cheap = await call(Array.from({ length: 100 }, (_, index) => rpc('eth_chainId', [], index)));
      assert.equal(cheap.body.length, 100);
      assert.ok(cheap.body.every((answer: { result?: unknown }) => answer.result === '0x7a69'));
    });

    it('relays a Bitcoin getblock at verbosity 0 or 1 only: 2 and 3, positional or named, are -32602', async () => {
      const tip = await call(rpc('getbestblockhash', [], 'tip'), 'bitcoin');
      const hash = tip.body.result as string;
      const verbose = await call(rpc('getblock', [hash, 1], 'one'), 'bitcoin');
      assert.equal(verbose.body.result.hash, hash, "the devnet's block");
      for (const params of [[hash, 2], [hash, 3], { blockhash: hash, verbosity: 2 }, { blockhash: hash, verbose: 3 }]) {
        const answer = await call({ jsonrpc: '2.0', id: 'full', method: 'getblock', params }, 'bitcoin');
        assert.equal(answer.body.error.code, -32602, JSON.stringify(params));
        assert.match(answer.body.error.message, /getblock is relayed at verbosity 0 or 1 only/);
      }
    });
  });

  describe('a slow, huge or redirecting node (a local double)', () => {
    let node: NodeDouble;
    let redirectTarget: NodeDouble;
    let orm: Orm;
    let app: TestApp;
    const organizations: TestOrganization[] = [];

    before(async () => {
      redirectTarget = await startNodeDouble(() => undefined);
      node = await startNodeDouble((method, response) => {
        if (method === 'eth_gasPrice') {
          response.writeHead(307, { location: `${redirectTarget.url}/` }).end();
          return true;
        }
        if (method === 'eth_getBalance') {
          // 2 MiB of a result, chunked (no Content-Length): only reading the stream can stop it.
          response.writeHead(200, { 'content-type': 'application/json' });
          response.write('{"jsonrpc":"2.0","id":0,"result":"0x');
          for (let chunk = 0; chunk < 32; chunk++) response.write('a'.repeat(64 * 1024));
          response.end('"}');
          return true;
        }
        return undefined;
      });
      await testOrm(); // migrated
      // Two connections in the pool: fewer than the node calls the test keeps in flight.
      orm = await createOrm(testConfig().DATABASE_URL, 2);
      app = await startTestApp({
        orm,
        config: {
          CHAIN_NODE_ETHEREUM_SANDBOX: node.url,
          CHAIN_NODE_ETHEREUM_SANDBOX_CHAIN_ID: '31337',
          CHAIN_NODE_MAX_RESPONSE_BYTES: String(1024 * 1024),
          CHAIN_NODE_TIMEOUT_MS: '60000',
          RPC_CONCURRENCY_PER_ORGANIZATION: '2',
        },
      });
      for (let index = 0; index < 4; index++) organizations.push(await createTestOrganization(`RPC double ${index}`));
    });
    after(async () => {
      node?.releaseHeld();
      await app?.close();
      await orm?.close();
      await node?.stop();
      await redirectTarget?.stop();
    });

    const call = (body: unknown, key = organizations[0]!.secret) => app.request('POST', '/v1/rpc/ethereum', { key, body });

    it('abandons an answer over CHAIN_NODE_MAX_RESPONSE_BYTES: -32005 naming the limit, never the URL; the node serves the next call', async () => {
      const huge = await call([rpc('eth_getBalance', ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', 'latest'], 'big'), rpc('eth_chainId', [], 'small')]);
      assert.equal(huge.status, 200);
      for (const answer of huge.body) {
        assert.equal(answer.error.code, -32005);
        assert.deepEqual(answer.error.data, { reason: 'response_too_large', limit_bytes: 1024 * 1024 });
        assert.match(answer.error.message, /larger than the 1048576 bytes the pass-through reads/);
        assert.doesNotMatch(answer.error.message, /127\.0\.0\.1/);
      }
      const next = await call(rpc('eth_chainId', [], 'again'));
      assert.deepEqual(next.body, { jsonrpc: '2.0', id: 'again', result: '0x7a69' });
    });

    it('follows no redirect: -32603 saying so, and the target is never called', async () => {
      const redirected = await call(rpc('eth_gasPrice', [], 'gas'));
      assert.equal(redirected.body.error.code, -32603);
      assert.match(redirected.body.error.message, /HTTP 307, a redirect, which node calls never follow/);
      assert.equal(redirectTarget.calls.length, 0);
    });

    it('holds no database connection while the node is slow: six calls held on a pool of two, another tenant is served; a seventh of a full organization is 429 at once', async () => {
      const [first, second, third, bystander] = organizations;
      const held = [first!, first!, second!, second!, third!, third!].map((organization, index) => call(rpc('eth_blockNumber', [], index), organization.secret));
      await eventually(async () => (node.heldCount() >= 6 ? true : undefined), 'six eth_blockNumber calls held by the node');

      // Each of these needs the database (authentication, the rate limit, the read itself).
      const wallets = await app.request('GET', '/v1/wallets', { key: bystander!.secret });
      assert.equal(wallets.status, 200, wallets.text);
      const relayed = await call(rpc('eth_chainId', [], 'bystander'), bystander!.secret);
      assert.deepEqual(relayed.body, { jsonrpc: '2.0', id: 'bystander', result: '0x7a69' });
      assert.equal((await app.request('GET', '/healthz')).status, 200);

      // The refusal waits for nothing: measured generously, the median of five under 250 ms.
      const timings: number[] = [];
      let refused = await call(rpc('eth_chainId', [], 'third'), first!.secret);
      for (let attempt = 0; attempt < 5; attempt++) {
        const started = performance.now();
        refused = await call(rpc('eth_chainId', [], 'third'), first!.secret);
        timings.push(performance.now() - started);
      }
      assert.ok(timings.sort((a, b) => a - b)[2]! < 250, `median refusal ${timings[2]} ms`);
      assert.equal(refused.status, 429);
      assert.equal(refused.body.error.code, 'rate_limited');
      assert.equal(refused.body.error.type, 'rate_limit_error');
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.match(refused.body.error.message, /already has 2 JSON-RPC requests in flight/);
      const keyed = { key: first!.secret, body: rpc('eth_chainId', [], 'keyed'), headers: { 'idempotency-key': `rpc-${Date.now()}` } };
      assert.equal((await app.request('POST', '/v1/rpc/ethereum', keyed)).status, 429, 'with an Idempotency-Key too');
      const live = await organizations[0]!.key(['rpc:call'], 'live');
      const otherEnvironment = await call(rpc('eth_chainId', [], 'live'), live.secret);
      assert.equal(otherEnvironment.status, 200, 'the live environment has its own slots');
      assert.equal(otherEnvironment.body.error.code, -32603, 'no live node is configured');

      node.releaseHeld();
      const answers = await Promise.all(held);
      answers.forEach((answer, index) => assert.deepEqual(answer.body, { jsonrpc: '2.0', id: index, result: '0x10' }));
      const again = await call(rpc('eth_chainId', [], 'after'), first!.secret);
      assert.equal(again.status, 200, 'the slots are given back');
      const retried = await app.request('POST', '/v1/rpc/ethereum', keyed);
      assert.deepEqual(retried.body, { jsonrpc: '2.0', id: 'keyed', result: '0x7a69' }, 'the 429 was not stored as the key\'s outcome: the retry ran');
    });
  });
});

interface NodeDouble {
  url: string;
  /** The methods it was called with, in order. */
  calls: string[];
  heldCount: () => number;
  /** Answers every held eth_blockNumber with 0x10. */
  releaseHeld: () => void;
  stop: () => Promise<void>;
}

/**
 * A JSON-RPC node that answers eth_chainId 31337 and holds every eth_blockNumber until released; `special`
 * answers any other method itself (returning true) or leaves it to the default (-32601).
 */
async function startNodeDouble(special: (method: string, response: ServerResponse) => true | undefined): Promise<NodeDouble> {
  const calls: string[] = [];
  const held: (() => void)[] = [];
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString()));
    request.on('end', () => {
      const payload = JSON.parse(text) as { id: number; method: string } | { id: number; method: string }[];
      const requests = Array.isArray(payload) ? payload : [payload];
      calls.push(...requests.map((one) => one.method));
      const first = requests[0]!;
      if (special(first.method, response)) return;
      const answer = (one: { id: number; method: string }) =>
        one.method === 'eth_chainId' ? { jsonrpc: '2.0', id: one.id, result: '0x7a69' } : one.method === 'eth_blockNumber' ? { jsonrpc: '2.0', id: one.id, result: '0x10' } : { jsonrpc: '2.0', id: one.id, error: { code: -32601, message: 'no such method' } };
      const send = () => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(Array.isArray(payload) ? requests.map(answer) : answer(first)));
      if (requests.some((one) => one.method === 'eth_blockNumber')) held.push(send);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    heldCount: () => held.length,
    releaseHeld: () => held.splice(0).forEach((send) => send()),
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
