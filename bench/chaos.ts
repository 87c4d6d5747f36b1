import { runChaos } from '../test/support/chaos/run';
import { runBenchmark } from './support';

/**
 * `npm run chaos`: the long chaos run (test/support/chaos/run.ts). CHAOS_SECONDS of mixed load (default
 * 300) while each of the worker, the API, the Temporal dev server and PostgreSQL is killed with SIGKILL
 * CHAOS_KILLS times (default 3) at moments drawn from CHAOS_SEED (default: random, printed), then the
 * invariants; exits non-zero on any violation.
 */
async function main() {
  const seed = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const started = Date.now();
  const log = (line: string) => console.log(`[chaos ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}`);
  const result = await runChaos({
    seed,
    loadSeconds: Number(process.env.CHAOS_SECONDS ?? 300),
    killsPerComponent: Number(process.env.CHAOS_KILLS ?? 3),
    operationsPerSecond: Number(process.env.CHAOS_RATE ?? 20),
    maxInFlight: Number(process.env.CHAOS_IN_FLIGHT ?? 512),
    settleSeconds: Number(process.env.CHAOS_SETTLE_SECONDS ?? 240),
    chain: process.env.CHAOS_CHAIN !== '0',
    log,
  });
  console.log(`\n## chaos (seed ${seed})`);
  for (const line of result.report) console.log(`  ${line}`);
  if (result.violations.length > 0) {
    console.log(`\n${result.violations.length} violations:`);
    for (const line of result.violations) console.log(`  ${line}`);
    throw new Error(`chaos run with seed ${seed}: ${result.violations.length} invariants violated`);
  }
  console.log('\nevery invariant held');
}

runBenchmark(main);
