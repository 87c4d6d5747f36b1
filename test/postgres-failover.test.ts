import assert from 'node:assert/strict';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import { shell } from './support/chaos/components';
import { stillRunning } from './support/chaos/started-processes';
import { FailoverPostgres } from './support/chaos/failover';
import { runChaos, type ChaosResult } from './support/chaos/run';
import { describeSample } from './support/connection-watch';
import { missingTool } from './support/missing-tool';

/** A fresh seed each run (the moment of the failover and the load follow it), printed for replay; CHAOS_SEED replays one. */
const SEED = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31));
/**
 * As short as a load can be with the promotion inside it: the kill falls between 10% and 85% of it, 1 to 6 s before the
 * promotion, and what is in flight then retries past the load's end. FAILOVER_LOAD_SECONDS and FAILOVER_RATE make a
 * longer or heavier drill (`npm run drill:failover`).
 */
const LOAD_SECONDS = Number(process.env.FAILOVER_LOAD_SECONDS ?? 10);
const RATE = Number(process.env.FAILOVER_RATE ?? 10);
/** The service's bound per process (README, "PostgreSQL"): both pools at DATABASE_POOL_MAX (10 by default), the API's LISTEN, a probe. */
const CONNECTIONS_PER_PROCESS = 2 * 10 + 2;

/**
 * The PostgreSQL failover drill (issue 51, docs/postgresql-failover.md): a primary and a synchronous streaming standby
 * (scripts/postgres.sh), the API and the worker on a DATABASE_URL naming both with target_session_attrs=read-write,
 * the chaos run's mixed load with Idempotency-Keys and client retries, and once, mid-load, the primary SIGKILLed and
 * the standby promoted while the old primary stays dead, still first in the URL. Then the chaos run's invariants:
 * every accepted operation done once, each organization's money what the load's own model says, the ledger balanced.
 */
describe(`PostgreSQL failover: the primary killed mid-load, its synchronous standby promoted, nothing committed lost or doubled (seed ${SEED}: CHAOS_SEED=${SEED} replays it)`, function () {
  this.timeout(600_000);
  let result: ChaosResult;
  let postgres: FailoverPostgres | undefined;
  // What the run logs, by the second since its start: printed when an assertion fails, its phases always.
  let started = 0;
  const lines: string[] = [];
  const log = (line: string) => lines.push(`${((Date.now() - started) / 1000).toFixed(0)} s: ${line}`);
  const runLog = () => `\n${lines.join('\n')}`;

  before(async function () {
    started = Date.now();
    const bin = await shell('pg_bin_dir').catch(() => '');
    const basebackup = await access(path.join(bin, 'pg_basebackup'), constants.X_OK).then(
      () => true,
      () => false,
    );
    if (!bin || !basebackup) missingTool(this, "PostgreSQL's server binaries with pg_basebackup (Debian's postgresql package)");
    result = await runChaos({
      seed: SEED,
      loadSeconds: LOAD_SECONDS,
      killsPerComponent: 0,
      killsOf: { postgres: 1 },
      // The dev server: the drill is of the service's PostgreSQL (the cluster's runs on a server of its own).
      temporal: 'dev',
      postgres: async (dir, processes) => {
        const started = await FailoverPostgres.create(dir, processes);
        postgres = started.component;
        return started;
      },
      operationsPerSecond: RATE,
      maxInFlight: 256,
      settleSeconds: 300,
      chain: false,
      log,
    });
    console.log(`      ${result.report[0]}; ${postgres?.evidence.writesAfterPromotion} writes answered after the promotion`);
    const at = (text: string) => lines.find((line) => line.includes(text))?.split(':')[0] ?? '?';
    console.log(
      `      ${((Date.now() - started) / 1000).toFixed(0)} s in all: the load from ${at('load starts')} to ${at('load done')} (primary killed at ${at('SIGKILL postgres')}, standby promoted at ${at('postgres up again')}), settled at ${at('settled (')}, checked at ${at('checked')}`,
    );
    const peak = postgres?.evidence.standbyConnectionsPeak;
    if (peak) console.log(`      the standby's most client connections at once: ${describeSample(peak)}`);
  });

  it('kills the primary once, with the standby in sync, and promotes the standby', () => {
    assert.deepEqual(result.kills, { worker: 0, api: 0, temporal: 0, postgres: 1 }, runLog());
    assert.equal(postgres!.evidence.syncStateAtKill, 'sync', 'every commit the service saw was on the standby when the primary died');
    assert.ok(postgres!.evidence.promotedAt, 'the standby was promoted');
  });

  it(`keeps every invariant of the chaos run (seed ${SEED}): nothing committed lost, nothing doubled, the ledger balanced`, () => {
    assert.deepEqual(result.violations, [], `seed ${SEED}:\n${result.report.join('\n')}${runLog()}`);
    // By count, not by the clock (a rate would be a timing assertion).
    assert.ok(result.operations >= RATE * LOAD_SECONDS, `the load sent ${result.operations} operations, fewer than its schedule's ${RATE * LOAD_SECONDS}`);
  });

  it('answers writes after the promotion, on the promoted standby, the dead primary still first in DATABASE_URL', () => {
    assert.ok((postgres!.evidence.writesAfterPromotion ?? 0) > 0, `writes answered after the promotion: ${postgres!.evidence.writesAfterPromotion}`);
  });

  it(`keeps each process of the service within its ${CONNECTIONS_PER_PROCESS} connections on the promoted standby (no connection left open by a reconnect)`, () => {
    const peak = postgres!.evidence.standbyConnectionsPeak;
    assert.ok(peak, 'the standby was watched');
    for (const service of ['custody-api', 'custody-worker']) {
      const held: number = Object.entries(peak.byName)
        .filter(([name]) => name.startsWith(`${service}:`))
        .reduce((sum, [, count]) => sum + count, 0);
      assert.ok(held <= CONNECTIONS_PER_PROCESS, `${service} held ${held} connections: ${describeSample(peak)}`);
    }
  });

  it('leaves no process it started running', async () => {
    for (const started of result.processes) assert.equal(stillRunning(started), false, `${started.name} (pid ${started.pid}, started at tick ${started.startTime}) still running`);
  });
});
