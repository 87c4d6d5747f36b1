import { defineFlow } from '../../temporal/flow';
import type { DepositResolution, TripStatus } from '../entities';

/**
 * A payout trip's flow, `payout-trip-<tripId>`: wait for the deposit until the quote expires,
 * follow it to its confirmations, settle (pro rata, excess credited), pay through the rail and
 * re-query an unknown answer, then watch the deposit address for late payments. Shared by the trip
 * service, which records its start, and workflows/payout-trip.ts. Workflow-safe.
 */
export interface TripInput {
  tripId: string;
  /** Set when a run continues as new: the trip has ended and only late payments are watched, until this time (epoch ms). */
  watchingLateUntil?: number;
}

export const payoutTripFlow = defineFlow<TripInput, TripStatus>({
  workflowType: 'payoutTripWorkflow',
  workflowId: (input) => `payout-trip-${input.tripId}`,
  resource: (input) => ({ type: 'payout_trip', id: input.tripId }),
  // Money flow: its activities are idempotent, so the reconciler may start a closed one again.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});

/** Where the trip's funding stands, as the deposit watch reads it. */
export interface FundingState {
  status: TripStatus;
  /** Epoch ms: the deadline for funds. */
  expiresAt: number;
  /** Funding deposits seen and not dropped. */
  seen: number;
  /** Of those, how many still wait for their confirmations. */
  unconfirmed: number;
}

/** What settling decided: pay `payout` through the rail, or the trip ended here (held, failed, expired). */
export type Settlement = { next: 'pay' } | { next: 'done'; status: TripStatus };

/** The rail's answer as the workflow sees it: final, or to be asked again. */
export type RailState = { state: 'paid' } | { state: 'failed' | 'blocked'; reason: string } | { state: 'pending' | 'unknown' };

/** The late deposits a watch pass resolved. */
export interface LateResolution {
  resolved: { depositId: string; resolution: DepositResolution }[];
  /** Late deposits seen that still wait for their confirmations. */
  waiting: number;
}
