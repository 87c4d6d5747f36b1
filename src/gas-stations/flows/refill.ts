import { defineFlow } from '../../temporal/flow';

/**
 * A gas station's automatic refill: assess the station, and when it is below threshold with
 * auto-refill on, send refill_amount from refill_from_wallet_id and follow that send until it
 * settles. One per station at a time: every trigger (creation, PATCH, a send from the station
 * settling, the periodic check) starts this id, and a trigger during a refill joins it.
 * Workflow-safe: no Node APIs.
 */
export interface RefillInput {
  stationId: string;
  /** Set by continue-as-new while a refill send is followed: the run's key (its events'), the attempt, the send, the next check. */
  following?: { key: string; attempt: number; transactionId: string; check: number };
}

/** How a run ended: nothing to do, a refill settled, or every attempt failed (reported). */
export type RefillOutcome = 'healthy' | 'auto_refill_off' | 'refilled' | 'failed';

export const gasStationRefillWorkflowId = (stationId: string) => `gas-station-refill-${stationId}`;

export const refillFlow = defineFlow<RefillInput, RefillOutcome>({
  workflowType: 'refillGasStationWorkflow',
  workflowId: (input) => gasStationRefillWorkflowId(input.stationId),
  resource: (input) => ({ type: 'gas_station', id: input.stationId }),
  // Started again after each run whenever the station is low again; each run assesses first.
  idReusePolicy: 'ALLOW_DUPLICATE',
  idConflictPolicy: 'USE_EXISTING',
});
