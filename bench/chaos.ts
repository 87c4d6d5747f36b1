import { z } from 'zod';
import { TEMPORAL_MODES } from '../test/support/chaos/model';
import { runChaos } from '../test/support/chaos/run';
import { report, runBenchmark } from './support';

/**
 * `npm run chaos`: the long chaos run (test/support/chaos/run.ts). CHAOS_SECONDS of mixed load (default
 * 300) while each of the worker, the API, Temporal and PostgreSQL is killed with SIGKILL CHAOS_KILLS times
 * (default 3; Temporal: CHAOS_TEMPORAL=cluster, the default, kills a history process and the matching service of a
 * cluster, with two API and two worker processes; CHAOS_TEMPORAL=dev the dev server, with one of each) at moments drawn from CHAOS_SEED (default: random, printed), then the
 * invariants; exits non-zero on any violation. CHAOS_FAIL=exception|crash makes the harness fail on purpose after its
 * first kill (test/chaos-harness.test.ts: nothing it started outlives it).
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
    temporal: z.enum(TEMPORAL_MODES).parse(process.env.CHAOS_TEMPORAL ?? 'cluster'),
    ...(process.env.CHAOS_FAIL ? { failOnPurpose: z.enum(['exception', 'crash']).parse(process.env.CHAOS_FAIL) } : {}),
    log,
  });
  console.log(`\n## chaos (seed ${seed})`);
  for (const line of result.report) console.log(`  ${line}`);
  // bench/results/<run>-chaos.json: what the run reached and what it found, with the commit and Node it ran.
  const row = {
    seed,
    operations: result.operations,
    operations_per_second: Number(result.operationsPerSecond.toFixed(1)),
    kills: Object.values(result.kills).reduce((total, count) => total + count, 0),
    kills_inside_activities: result.killsInActivities,
    violations: result.violations.length,
  };
  await report('chaos', [row], [], { seed, kills: result.kills, violations: result.violations, report: result.report, processes_started: result.processes.length });
  if (result.violations.length > 0) {
    console.log(`\n${result.violations.length} violations:`);
    for (const line of result.violations) console.log(`  ${line}`);
    throw new Error(`chaos run with seed ${seed}: ${result.violations.length} invariants violated`);
  }
  console.log('\nevery invariant held');
}

runBenchmark(main);
