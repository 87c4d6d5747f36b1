import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { createPayoutActivities } from '../activities/payouts';
import type { payoutTripFlow } from '../src/payouts/flows/trip';
import type { TripStatus } from '../src/payouts/entities';
import type { WorkflowOf } from '../src/temporal/flow';

const activities = proxyActivities<ReturnType<typeof createPayoutActivities>>({
  // One step reads a trip's deposits, asks a rail, or makes a refund's send: seconds, not minutes.
  startToCloseTimeout: '1 minute',
  // Money never gives up: an outage (database, rail, node) is retried for as long as it lasts, at most 5 min apart.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** How often the deposit address is read while funds are awaited or confirming: every 5 s for 2 minutes, then every 30 s. */
const fundingPollMs = (polls: number) => (polls <= 24 ? 5_000 : 30_000);
/** How often a late payment is looked for once the trip has ended. */
const LATE_POLL = '5 minutes';
/** Polls per run before it continues as new, so history stays bounded however long a wait lasts. */
export const POLLS_PER_RUN = 500;

/**
 * `payout-trip-<tripId>`: waits for the deposit until the quote expires (nothing seen: expired,
 * payouts.withdrawal.expired); once funds are seen (asset.received) waits for every funding deposit's
 * confirmations (rule 8); settles (pro rata within the margin, excess credited: rule 7); asks the
 * rail to pay and asks again, never sends again, while its answer is pending or unknown; ends success
 * or failed (rule 9); then watches the address for late payments and resolves each one as configured
 * (rule 1). Every step reads where the trip stands from the database and is idempotent.
 */
export const payoutTripWorkflow: WorkflowOf<typeof payoutTripFlow> = async (input) => {
  const { tripId } = input;
  if (input.watchingLateUntil !== undefined) return watchLatePayments(tripId, input.watchingLateUntil);
  const trip = await activities.openPayoutTrip({ tripId });
  let status: TripStatus = trip.status;
  if (status === 'awaiting_deposit' || status === 'funded') {
    status = await awaitFunding(tripId, trip.expiresAt);
    if (status === 'funded') {
      const settlement = await activities.settlePayoutTrip({ tripId });
      status = settlement.next === 'pay' ? 'processing' : settlement.status;
    }
  }
  if (status === 'processing') await payOut(tripId);
  return watchLatePayments(tripId, Date.now() + trip.lateWatchSeconds * 1000);
};

/** Returns 'funded' once every funding deposit is confirmed, or 'expired' when none came in time. */
async function awaitFunding(tripId: string, expiresAt: number): Promise<TripStatus> {
  for (let polls = 1; ; polls += 1) {
    const funding = await activities.watchPayoutTripFunding({ tripId, acceptFunding: Date.now() < expiresAt });
    if (funding.seen > 0 && funding.unconfirmed === 0) return 'funded';
    if (funding.seen === 0 && Date.now() >= expiresAt) {
      const status = await activities.expirePayoutTrip({ tripId });
      if (status === 'expired') return status;
    }
    if (polls >= POLLS_PER_RUN) await continueAsNew<typeof payoutTripWorkflow>({ tripId });
    await sleep(funding.seen === 0 ? Math.max(1, Math.min(fundingPollMs(polls), expiresAt - Date.now())) : fundingPollMs(polls));
  }
}

/** Asks the rail until its answer is final: every 10 s for 5 minutes, then every 5 minutes. */
async function payOut(tripId: string): Promise<void> {
  for (let polls = 1; ; polls += 1) {
    const answer = await activities.payPayoutTrip({ tripId });
    if (answer.state === 'paid' || answer.state === 'failed' || answer.state === 'blocked') {
      await activities.finishPayoutTrip({ tripId, answer });
      return;
    }
    if (polls >= POLLS_PER_RUN) await continueAsNew<typeof payoutTripWorkflow>({ tripId });
    await sleep(polls < 30 ? '10 seconds' : '5 minutes');
  }
}

/** Resolves late deposits until `until` (epoch ms) has passed and none still confirms; returns the trip's final status. */
async function watchLatePayments(tripId: string, until: number): Promise<TripStatus> {
  for (let polls = 1; ; polls += 1) {
    const late = await activities.resolveLatePayoutDeposits({ tripId });
    if (Date.now() >= until && late.waiting === 0) break;
    if (polls >= POLLS_PER_RUN) await continueAsNew<typeof payoutTripWorkflow>({ tripId, watchingLateUntil: until });
    await sleep(LATE_POLL);
  }
  return (await activities.openPayoutTrip({ tripId })).status;
}
