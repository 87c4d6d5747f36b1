import assert from 'node:assert/strict';
import { runChaos } from './support/chaos';

/**
 * The short chaos run (`npm run chaos` is the long one, docs/chaos.md): a light mixed load while the
 * worker, the API, the Temporal dev server and PostgreSQL are each killed once with SIGKILL and
 * started again, then every invariant: each accepted operation done once (or still running and
 * visible), each event delivered or scheduled, no money created or destroyed (payout trips' included),
 * each wallet's ledger equal to its balance on the chain (anvil, with deposits and sends in the load).
 */
describe('Chaos: every component killed once under load, nothing lost, doubled, created or destroyed', function () {
  this.timeout(600_000);

  it('keeps every invariant (seed 18)', async () => {
    const result = await runChaos({ seed: 18, loadSeconds: 45, killsPerComponent: 1, operationsPerSecond: 4, maxInFlight: 8, settleSeconds: 180, chain: true, log: () => undefined });
    assert.deepEqual(result.violations, [], result.report.join('\n'));
  });
});
