import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { createGasStationActivities } from '../activities/gas-stations';
import type { sponsorshipFlow } from '../src/gas-stations/flows/sponsorship';
import type { WorkflowOf } from '../src/temporal/flow';
import { CHECK_SECONDS_OF_EARLIER_RUNS } from './send-transaction';

const activities = proxyActivities<ReturnType<typeof createGasStationActivities>>({
  // Each step is one node call or a small database transaction.
  startToCloseTimeout: '1 minute',
  // Money never gives up: an outage (node, database) is retried for as long as it lasts, at most 5 min apart.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** The first 60 waits are `checkSeconds` long (CHAIN_CHECK_SECONDS, 5 s by default), then every 30 s. */
const FAST_WAITS = 60;
/** A run continues as new after this many waits (a few events each), so no history grows past ~1,500 events. */
export const WAITS_PER_RUN = 200;

/**
 * `sponsorship-<id>`: a gas station pays someone's fee. The station's fuel send (its own
 * `transaction-<id>` workflow) is followed until it settles; a fuel that never reached the chain
 * fails the sponsorship and releases the sponsored send. Once the fuel is confirmed (and on a
 * custody sender's books: gas-stations/fuel.ts), a sponsored send's workflow is started (`funded`),
 * or the client's signed transaction is broadcast and followed to its confirmation count,
 * re-broadcast with the same bytes while a node does not know it. Every step is idempotent, so a continued-as-new run simply carries on from what is stored.
 */
export const fundSponsorshipWorkflow: WorkflowOf<typeof sponsorshipFlow> = async (input) => {
  let waits = 0;
  const pause = async () => {
    waits += 1;
    await sleep(waits <= FAST_WAITS ? (input.checkSeconds ?? CHECK_SECONDS_OF_EARLIER_RUNS) * 1000 : '30 seconds');
  };
  for (;;) {
    const fuel = await activities.sponsorshipFuelOutcome(input);
    if (fuel === 'confirmed') break;
    if (fuel === 'failed') {
      return activities.failSponsorship({ ...input, reason: 'fuel_failed', message: "The gas station's fuel send never reached the chain: the fee was not paid." });
    }
    if (waits >= WAITS_PER_RUN) return continueAsNew<typeof fundSponsorshipWorkflow>(input);
    await pause();
  }
  const released = await activities.releaseSponsorship(input);
  if (released !== 'broadcasting') return released;
  if ((await activities.broadcastSponsored(input)) === 'failed') return 'failed';
  for (;;) {
    if (waits >= WAITS_PER_RUN) return continueAsNew<typeof fundSponsorshipWorkflow>(input);
    await pause();
    const state = await activities.checkSponsored(input);
    if (state === 'confirmed' || state === 'failed') return state;
    if (state === 'missing' && (await activities.broadcastSponsored(input)) === 'failed') return 'failed';
  }
};
