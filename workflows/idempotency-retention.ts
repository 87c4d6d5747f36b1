import { proxyActivities } from '@temporalio/workflow';
import type { createIdempotencyActivities } from '../activities/idempotency';

const { purgeIdempotencyRecords } = proxyActivities<ReturnType<typeof createIdempotencyActivities>>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '10 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 10 },
});

export interface IdempotencyRetentionInput {
  retentionHours: number;
}

/**
 * Started hourly by the `idempotency-retention` Schedule. The cutoff comes from workflow time,
 * which is deterministic on replay and skips along with the time-skipping test server.
 */
export async function idempotencyRetentionWorkflow(input: IdempotencyRetentionInput): Promise<{ cutoff: string; purged: number }> {
  const cutoff = new Date(Date.now() - input.retentionHours * 60 * 60 * 1000).toISOString();
  const purged = await purgeIdempotencyRecords({ cutoff });
  return { cutoff, purged };
}
