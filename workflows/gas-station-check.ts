import { proxyActivities } from '@temporalio/workflow';
import type { createGasStationActivities } from '../activities/gas-stations';
import type { Environment } from '../src/api-keys/entities';

const { armLowGasStations } = proxyActivities<ReturnType<typeof createGasStationActivities>>({
  startToCloseTimeout: '5 minutes',
  // Arming a refill starts money moving: never given up. While a run waits out an outage the Schedule skips its ticks (overlap SKIP).
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export interface GasStationCheckInput {
  /** Tests scope a check to their own organization. */
  organizationId?: string;
  environment?: Environment;
}

/**
 * Started every minute by the `gas-station-check` Schedule: arms the refill of every auto-refill
 * station whose balance on the chain is below its threshold (spends the platform did not make).
 */
export async function gasStationCheckWorkflow(input: GasStationCheckInput): Promise<{ armed: number }> {
  return { armed: await armLowGasStations(input) };
}
