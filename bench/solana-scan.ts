import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import { ChainNodes } from '../src/chains/nodes';
import { loadConfig, type Config } from '../src/config';
import { createOrm, migrate, type Orm } from '../src/db/orm';
import type { Logger } from '../src/logger';
import { scanChain, type ScanDeps } from '../src/monitoring/scanner';
import { createTemporalClient } from '../src/temporal/client';
import { WorkflowStarter } from '../src/temporal/starter';
import type { ScanFloorRequest, ScanFloorResult } from './solana-scan-floor';
import type { ScanNodeReady, ScanNodeRequest } from './solana-scan-node';
import { alternate, BENCH_SECONDS, cpuSnapshot, cpuSpentSince, cpuSeconds, median, report, round, runBenchmark, serviceLogger, timeStatements } from './support';

/** Mainnet-beta's pace: a slot every 400 ms. */
const MAINNET_SLOTS_PER_SECOND = 2.5;
/** Transactions in every block (mainnet's blocks carry about a thousand, votes included). */
const TRANSACTIONS = Number(process.env.BENCH_SOLANA_BLOCK_TRANSACTIONS ?? 1000);
/** Each node answer's delay: a remote node's round trip and the time it takes to serve a whole block. */
const LATENCY_MS = Number(process.env.BENCH_SOLANA_NODE_LATENCY_MS ?? 400);
/** The backlog each round starts behind the tip: more than any target scans within BENCH_SECONDS. */
const BACKLOG = Math.ceil(BENCH_SECONDS * 40);
/** What the scan workflow asks of one pass (workflows/scan-chain.ts). */
const BLOCKS_PER_PASS = 100;

const scannerTarget = (parallel: number) => `scanner (scanChain, pass after pass), ${parallel} block${parallel === 1 ? '' : 's'} read at once`;
const FLOOR = 'floor: the same blocks read as bare JSON, the same number at once, a commit per block (baseline, own process)';

/**
 * Solana scanning at mainnet's pace: how many slots a second the scanner processes while behind a node
 * sealing a slot every 400 ms (bench/solana-scan-node.ts: mainnet-sized blocks, every answer delayed by a
 * remote node's round trip), as the `scanChain` activity runs it (its deps, 100 blocks a pass, pass after
 * pass), against the real PostgreSQL with its durability on. Each round starts BACKLOG slots behind the
 * tip and runs for BENCH_SECONDS (or until it caught up). Targets, alternating: the scanner reading
 * SOLANA_SCAN_PARALLEL_BLOCKS blocks at once; the scanner reading one at a time (what it did before);
 * and the floor in a process of its own (bench/solana-scan-floor.ts: the same blocks read as many at once,
 * parsed as JSON and nothing more, each block's height committed).
 */
async function main() {
  const node = fork(path.join(__dirname, 'solana-scan-node.js'));
  process.once('SIGTERM', () => {
    node.kill();
    process.exit(143);
  });
  try {
    const request: ScanNodeRequest = { transactions: TRANSACTIONS, latencyMs: LATENCY_MS, backlog: BACKLOG + 10 };
    node.send(request);
    const [ready] = (await Promise.race([once(node, 'message'), once(node, 'exit').then(([code]) => Promise.reject(new Error(`the node process exited with ${code}`)))])) as [ScanNodeReady];
    const config = loadConfig({
      ...process.env,
      TEMPORAL_TASK_QUEUE: `bench-solana-scan-${randomUUID()}`,
      CHAIN_NODE_SOLANA_SANDBOX: ready.url,
      CHAIN_TOKENS_SOLANA_SANDBOX: `USDC_SOL=${ready.mint}`,
      // A node's answer delayed by the latency and the whole block behind it must not time out.
      CHAIN_NODE_TIMEOUT_MS: String(Math.max(10_000, LATENCY_MS * 10)),
    });
    const log = serviceLogger(config.LOG_LEVEL);
    const orm = await createOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
    const temporal = createTemporalClient(config);
    try {
      await migrate(orm);
      const parallel = config.SOLANA_SCAN_PARALLEL_BLOCKS;
      const ours = scannerMeasurement(config, log, orm, temporal.client, node, parallel);
      const before = scannerMeasurement(config, log, orm, temporal.client, node, 1);
      const rows = await alternate([
        { target: scannerTarget(parallel), measure: ours },
        { target: scannerTarget(1), measure: before },
        { target: FLOOR, measure: () => floorMeasurement(config, ready.url, node, parallel) },
      ]);
      const rate = (target: string) => median(rows.filter((row) => row.target === target).map((row) => row.slots_per_second));
      await report(
        'solana-scan',
        rows,
        [
          { name: `Solana slots scanned/s, ${parallel} blocks read at once / mainnet's 2.5 slots/s (median, ${TRANSACTIONS} transactions a block, ${LATENCY_MS} ms a node answer)`, value: rate(scannerTarget(parallel)) / MAINNET_SLOTS_PER_SECOND, goal: 1 },
          { name: `Solana slots scanned/s, one block read at a time (before) / mainnet's 2.5 slots/s (median)`, value: rate(scannerTarget(1)) / MAINNET_SLOTS_PER_SECOND },
          { name: `Solana slots scanned/s, ${parallel} at once / the floor reading as many at once (medians)`, value: rate(scannerTarget(parallel)) / rate(FLOOR) },
        ],
        { transactions_per_block: TRANSACTIONS, block_bytes: ready.blockBytes, node_latency_ms: LATENCY_MS, backlog_slots: BACKLOG, blocks_per_pass: BLOCKS_PER_PASS, parallel_blocks: parallel },
      );
    } finally {
      await temporal.connection.close();
      await orm.close();
    }
  } finally {
    node.kill();
  }
}

/**
 * One round of the scanner reading `parallel` blocks at once: the cursor put BACKLOG slots behind the
 * tip, then passes as the workflow runs them until BENCH_SECONDS passed or it caught up; the slots it
 * processed per second, its lag at the end, PostgreSQL's wait (every statement from send to answer) and
 * the machine's CPU by where it went.
 */
function scannerMeasurement(base: Config, log: Logger, orm: Orm, client: ReturnType<typeof createTemporalClient>['client'], node: ChildProcess, parallel: number) {
  const config: Config = { ...base, SOLANA_SCAN_PARALLEL_BLOCKS: parallel };
  const chains = new ChainNodes(config, log, orm);
  const starter = new WorkflowStarter(client, config, log);
  const deps: ScanDeps = {
    chains,
    config,
    log,
    em: () => orm.em.fork(),
    // The activity's transactionWithStarts: the starts recorded (webhook deliveries) fired once it commits.
    transaction: (work) => starter.transaction(orm.em.fork(), work, { detachDeliveries: true }),
  };
  const scope = { chain: 'solana', environment: 'sandbox' } as const;
  return async () => {
    // A first pass makes the cursor; it is then put BACKLOG slots behind the tip.
    await scanChain(deps, { ...scope, maxBlocks: 0 });
    const provider = await chains.provider('solana', 'sandbox');
    const start = (await provider.tip()).height - BACKLOG;
    const hash = (await provider.block(start))!.hash;
    await orm.em.fork().transactional(async (em) => {
      await em.execute(`update chain_scan_cursors set height = ?, hash = ? where chain = 'solana' and environment = 'sandbox'`, [start, hash]);
      await em.execute(`delete from scanned_blocks where chain = 'solana' and environment = 'sandbox'`);
      await em.execute(`insert into scanned_blocks (chain, environment, height, hash, scanned_at) values ('solana', 'sandbox', ?, ?, now())`, [start, hash]);
    });
    let dbWait = 0;
    const stopTiming = timeStatements((ms) => (dbWait += ms));
    const processes = { solana_node: node.pid! };
    const cpuBefore = cpuSnapshot(processes);
    const started = performance.now();
    let result = { height: start as number | null, tipHeight: null as number | null, caughtUp: false };
    let passes = 0;
    try {
      while (!result.caughtUp && performance.now() - started < BENCH_SECONDS * 1000) {
        const pass = await scanChain(deps, { ...scope, maxBlocks: BLOCKS_PER_PASS });
        if (pass.unavailable) throw new Error(`the node was unavailable: ${pass.unavailable}`);
        result = pass;
        passes++;
      }
    } finally {
      stopTiming();
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = cpuSpentSince(cpuBefore, 1, processes);
    const slots = result.height! - start;
    return {
      target: scannerTarget(parallel),
      slots,
      seconds: round(seconds),
      slots_per_second: round(slots / seconds),
      lag_at_end: (await provider.tip()).height - result.height!,
      caught_up: result.caughtUp,
      passes,
      db_wait_s: round(dbWait / 1000),
      ...cpuSeconds(cpu),
    };
  };
}

/** One floor round in a process of its own (bench/solana-scan-floor.ts), from BACKLOG slots behind the tip. */
async function floorMeasurement(config: Config, nodeUrl: string, node: ChildProcess, parallel: number) {
  const child = fork(path.join(__dirname, 'solana-scan-floor.js'));
  try {
    const [ready] = (await once(child, 'message')) as [string];
    if (ready !== 'ready') throw new Error(`the floor process said ${ready}`);
    const chains = new ChainNodes(config, serviceLogger('silent'), undefined as never);
    const provider = await chains.provider('solana', 'sandbox');
    const height = (await provider.tip()).height - BACKLOG;
    const request: ScanFloorRequest = { databaseUrl: config.DATABASE_URL, nodeUrl, from: { height, hash: (await provider.block(height))!.hash }, parallel, seconds: BENCH_SECONDS };
    const processes = { solana_node: node.pid!, floor_process: child.pid! };
    const cpuBefore = cpuSnapshot(processes);
    child.send(request);
    const [result] = (await Promise.race([once(child, 'message'), once(child, 'exit').then(([code]) => Promise.reject(new Error(`the floor process exited with ${code}`)))])) as [ScanFloorResult];
    const cpu = cpuSpentSince(cpuBefore, 1, processes);
    return { target: FLOOR, slots: result.slots, seconds: round(result.seconds), slots_per_second: round(result.slots / result.seconds), lag_at_end: result.lag, caught_up: result.lag <= 0, passes: 0, db_wait_s: 0, ...cpuSeconds(cpu) };
  } finally {
    child.kill();
  }
}

runBenchmark(main);
