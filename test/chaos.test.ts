import assert from 'node:assert/strict';
import { runChaos, type ChaosResult } from './support/chaos/run';

/**
 * The short chaos run (`npm run chaos` is the long one, docs/chaos.md): a mixed load of three organizations
 * (cross-organization Lightning payments, card fundings, on-chain sends, consolidation sweeps, payout trips) while
 * the worker, the API, the Temporal dev server and PostgreSQL are each killed once with SIGKILL, each kill timed on
 * an accepted operation's workflow, then every invariant: each accepted operation done once and settled, each
 * organization's money what the load's own model says, each expected event delivered or scheduled, each wallet's
 * ledger equal to its balance on the chain (anvil), no component exiting on its own. Then the proof that the checks
 * can fail: two faults planted in the same run's database, and every check run again.
 */
describe('Chaos: every component killed under load, nothing lost, doubled, created or destroyed', function () {
  this.timeout(600_000);
  let result: ChaosResult;

  before(async () => {
    result = await runChaos({ seed: 18, loadSeconds: 12, killsPerComponent: 1, operationsPerSecond: 20, maxInFlight: 512, settleSeconds: 120, chain: true, plantFaults: true, log: () => undefined });
    // What the run reached (operations a second, kills that landed inside an activity, sweeps), in the suite's output.
    console.log(`      ${result.report[0]}`);
    console.log(`      ${result.report.filter((line) => line.startsWith('sweep')).join('\n      ')}`);
  });

  it('keeps every invariant (seed 18)', () => {
    assert.deepEqual(result.violations, [], result.report.join('\n'));
    // Its strength by count, not by the clock: a tick the busy machine starts late is still sent (a rate would be a timing assertion).
    assert.ok(result.operations >= 20 * 12, `the load sent ${result.operations} operations, fewer than its schedule's 240 (20 a second for 12 s)`);
  });

  it('reports a doubled credit and a skipped debit planted in its database afterwards, by their organization and currency, and nothing else', () => {
    const { planted, violations } = result.faulted!;
    assert.equal(planted.length, 2);
    assert.deepEqual(
      violations.map((violation) => planted.find((fault) => violation.startsWith(`${fault}:`)) ?? violation).sort(),
      [...planted].sort(),
      'each planted fault caught, and nothing else',
    );
  });
});
