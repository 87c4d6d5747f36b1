import { performance } from 'node:perf_hooks';
import pg from 'pg';

/** What the parent (bench/solana-scan.ts) asks of one measurement. */
export interface ScanFloorRequest {
  databaseUrl: string;
  nodeUrl: string;
  /** The block the floor starts after, as the scanner's cursor does. */
  from: { height: number; hash: string };
  /** Blocks read at once. */
  parallel: number;
  seconds: number;
}

export interface ScanFloorResult {
  slots: number;
  seconds: number;
  /** The node's tip when it stopped, less the last block it committed. */
  lag: number;
  /** This process's CPU (user + system), in ms. */
  cpu_ms: number;
}

let rpcId = 0;
async function rpc<T>(url: string, method: string, params: unknown[]): Promise<T> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params }) });
  const body = (await response.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

const tipOf = async (url: string) => (await rpc<{ context: { slot: number } }>(url, 'getLatestBlockhash', [{ commitment: 'confirmed' }])).context.slot;

/**
 * The floor of Solana scanning, in a process of its own: what any scanner of the same blocks must do.
 * The blocks after `from` are read up to `parallel` at once (getBlock, jsonParsed, full transactions, parsed
 * as JSON and nothing more), taken in order, each checked against its parent's hash and its height
 * committed in a transaction of its own (a scanner resumes from it), until the tip or `seconds`.
 */
async function floorRun(request: ScanFloorRequest): Promise<ScanFloorResult> {
  const client = new pg.Client({ connectionString: request.databaseUrl });
  await client.connect();
  await client.query('create table if not exists bench_solana_scan_floor (id int primary key, height bigint not null, hash text not null)');
  await client.query('insert into bench_solana_scan_floor values (1, $1, $2) on conflict (id) do update set height = excluded.height, hash = excluded.hash', [request.from.height, request.from.hash]);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  let cursor = request.from;
  let tip = await tipOf(request.nodeUrl);
  // Sliding, as the scanner's read-ahead: a read starts as soon as a block is taken.
  const reading = new Map<number, Promise<{ blockhash: string; previousBlockhash: string }>>();
  const read = (height: number) => rpc<{ blockhash: string; previousBlockhash: string }>(request.nodeUrl, 'getBlock', [height, { commitment: 'confirmed', encoding: 'jsonParsed', transactionDetails: 'full', rewards: false, maxSupportedTransactionVersion: 0 }]);
  try {
    while (performance.now() - started < request.seconds * 1000) {
      if (cursor.height >= tip) {
        tip = await tipOf(request.nodeUrl);
        if (cursor.height >= tip) break;
      }
      for (let ahead = cursor.height + 1; ahead <= Math.min(tip, cursor.height + request.parallel); ahead += 1) {
        if (reading.has(ahead)) continue;
        const block = read(ahead);
        block.catch(() => undefined);
        reading.set(ahead, block);
      }
      const height = cursor.height + 1;
      const block = await reading.get(height)!;
      reading.delete(height);
      if (block.previousBlockhash !== cursor.hash) throw new Error(`block ${height} does not extend ${cursor.height}`);
      await client.query('update bench_solana_scan_floor set height = $1, hash = $2 where id = 1', [height, block.blockhash]);
      cursor = { height, hash: block.blockhash };
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    return { slots: cursor.height - request.from.height, seconds, lag: (await tipOf(request.nodeUrl)) - cursor.height, cpu_ms: Math.round((cpu.user + cpu.system) / 1000) };
  } finally {
    await client.end();
  }
}

// The parent sends one request, reads the result and then ends the process.
process.once('message', (request: ScanFloorRequest) => {
  floorRun(request).then(
    (result) => process.send!(result),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
process.send!('ready');
