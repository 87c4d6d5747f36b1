import { condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { createEventActivities } from '../activities/events';
import { PAUSED_CHECK_INTERVAL_MS, retryNowSignal, type webhookDeliveryFlow } from '../src/events/flows/delivery';
import type { WorkflowOf } from '../src/temporal/flow';

const { attemptWebhookDelivery } = proxyActivities<ReturnType<typeof createEventActivities>>({
  // One HTTP attempt is cut at 10 s; the rest is two small transactions.
  startToCloseTimeout: '1 minute',
  // Infrastructure failures only (database, worker crash), retried until they pass: the attempt row makes a retry resend nothing.
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Wait after the nth failed attempt (measured from that attempt's start); the last entry repeats. */
export const RETRY_DELAYS_MS = [0, 1 * MINUTE, 5 * MINUTE, 15 * MINUTE, 1 * HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR] as const;
/** No attempt is scheduled later than this after the run's first attempt. */
export const RETRY_WINDOW_MS = 24 * HOUR;

/**
 * Delivers one event to one destination: attempt, immediate retry, then 1 min, 5 min, 15 min,
 * 1 h, 2 h, 4 h, 8 h... while within 24 h of the first attempt and under max_attempts. The waits
 * are durable timers, so a worker restart resumes the schedule where it was. While the endpoint's
 * circuit is open and another delivery probes it, this one is paused: it sends nothing, its
 * schedule and window stand still, and the probe's success (a retryNow signal) resumes it.
 */
export const webhookDeliveryWorkflow: WorkflowOf<typeof webhookDeliveryFlow> = async (input) => {
  let retryRequested = false;
  setHandler(retryNowSignal, () => {
    retryRequested = true;
  });
  const firstAttemptAt = Date.now();
  let pausedMs = 0;
  for (let attempt = 1; ; attempt += 1) {
    const attemptedAt = Date.now();
    const nextAttemptAt = attemptedAt + RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length) - 1]!;
    const last = (input.maxAttempts !== null && attempt >= input.maxAttempts) || nextAttemptAt > firstAttemptAt + pausedMs + RETRY_WINDOW_MS;
    const outcome = await attemptWebhookDelivery({
      deliveryId: input.deliveryId,
      run: input.run,
      attempt,
      attemptedAt: new Date(attemptedAt).toISOString(),
      nextRetryAt: last ? null : new Date(nextAttemptAt).toISOString(),
      // Asked for (retryNow: a manual retry or the probe's success) or a manual retry's new run: attempt even if the circuit is open.
      bypassCircuit: retryRequested || (attempt === 1 && input.run > 1),
    });
    if (outcome === 'paused') {
      // Nothing was sent: the same attempt number is tried when the probe succeeds (or at the next check).
      attempt -= 1;
      await condition(() => retryRequested, PAUSED_CHECK_INTERVAL_MS);
      pausedMs += Date.now() - attemptedAt;
      continue;
    }
    if (outcome !== 'retry') return { outcome, attempts: attempt };
    retryRequested = false;
    const wait = nextAttemptAt - Date.now();
    if (wait > 0) await condition(() => retryRequested, wait);
  }
};
