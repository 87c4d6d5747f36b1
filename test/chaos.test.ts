import assert from 'node:assert/strict';
import { runChaos } from './support/chaos';

/**
 * The short chaos run (`npm run chaos` is the long one, docs/chaos.md): a mixed load of three organizations
 * (cross-organization Lightning payments, card fundings, on-chain sends, payout trips) while the worker, the API,
 * the Temporal dev server and PostgreSQL are each killed once with SIGKILL, each kill timed on an accepted
 * operation's workflow, then every invariant: each accepted operation done once and settled, each organization's
 * money what the load's own model says, each expected event delivered or scheduled, each wallet's ledger equal to
 * its balance on the chain (anvil), no component exiting on its own. Then the proof that the checks can fail.
 */
describe('Chaos: every component killed under load, nothing lost, doubled, created or destroyed', function () {
  this.timeout(600_000);

  it('keeps every invariant (seed 18)', async () => {
    const result = await runChaos({ seed: 18, loadSeconds: 12, killsPerComponent: 1, operationsPerSecond: 20, maxInFlight: 512, settleSeconds: 120, chain: true, log: () => undefined });
    // What the run reached (operations a second, kills that landed inside an activity), in the suite's output.
    console.log(`      ${result.report[0]}`);
    assert.deepEqual(result.violations, [], result.report.join('\n'));
    assert.ok(result.operationsPerSecond >= 20, `the load sent ${result.operationsPerSecond} operations a second`);
  });

  it('reports a doubled credit and a skipped debit planted in the database by their organization and currency (no kills)', async () => {
    const result = await runChaos({ seed: 7, loadSeconds: 5, killsPerComponent: 0, operationsPerSecond: 20, maxInFlight: 512, settleSeconds: 120, chain: false, plantFaults: true, log: () => undefined });
    assert.equal(result.planted.length, 2);
    assert.deepEqual(
      result.violations.map((violation) => result.planted.find((fault) => violation.startsWith(`${fault}:`)) ?? violation).sort(),
      [...result.planted].sort(),
      'each planted fault caught, and nothing else',
    );
  });
});
