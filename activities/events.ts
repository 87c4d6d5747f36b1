import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import type { DestinationResolvers } from '../src/events/destinations';
import { Delivery, DeliveryAttempt, WebhookEndpoint } from '../src/events/entities';
import { PAUSED_CHECK_INTERVAL_MS, retryNowSignal, webhookDeliveryFlow } from '../src/events/flows/delivery';
import { signedHeaders } from '../src/events/secrets';
import { postWebhook, type PostResult } from '../src/events/sender';
import { deliveryPayload, emit, failHeldDeliveries, releaseHeldDeliveries } from '../src/events/service';
import type { Logger } from '../src/logger';
import { prefixedId } from '../src/shared/ids';
import { activityStarter } from './with-starts';

const HOUR_MS = 3_600_000;

export interface EventActivityDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  /** Where each kind of destination is looked up at attempt time. */
  destinations: DestinationResolvers;
}

export interface AttemptInput {
  deliveryId: string;
  run: number;
  /** From the workflow: deterministic, so a restarted worker never reuses a number. */
  attempt: number;
  /** Workflow time of the attempt (ISO). */
  attemptedAt: string;
  /** When the workflow will try again if this attempt fails; null: this is the last attempt of the run. */
  nextRetryAt: string | null;
  /** Attempt even while the endpoint's circuit is open (a manual retry, or the probe's success resuming it). */
  bypassCircuit?: boolean;
}

/**
 * delivered; retry: failed, another attempt is scheduled; failed: the run is over; gone: 410, destination disabled;
 * stopped: nothing was sent, the run is over; paused: nothing was sent, the endpoint's circuit is open and another delivery probes it.
 */
export type AttemptOutcome = 'delivered' | 'retry' | 'failed' | 'gone' | 'stopped' | 'paused';

const INTERRUPTED = 'attempt interrupted before its outcome was recorded; not resent';
const PAUSED = 'webhook endpoint failing; paused until the delivery probing it succeeds';

/**
 * The endpoint's circuit: closed (fewer than WEBHOOK_CIRCUIT_FAILURES consecutive failures), anyone
 * attempts; open, only its probe delivery does. The probe is whoever claims it first; a probe that
 * is no longer pending (its run ended) is replaced by the next delivery that asks.
 */
async function mayAttempt(em: EntityManager, config: Config, delivery: Delivery): Promise<boolean> {
  const rows = await em.getConnection().execute<{ id: string }[]>(
    `update webhook_endpoints e set probe_delivery_id = case when e.consecutive_failures >= ? then ? else e.probe_delivery_id end
     where e.id = ? and (e.consecutive_failures < ? or e.probe_delivery_id is null or e.probe_delivery_id = ?
       or not exists (select 1 from event_deliveries d where d.id = e.probe_delivery_id and d.status = 'pending'))
     returning e.id`,
    [config.WEBHOOK_CIRCUIT_FAILURES, delivery.id, delivery.destinationId, config.WEBHOOK_CIRCUIT_FAILURES, delivery.id],
  );
  return rows.length > 0;
}

export const createEventActivities = (deps: EventActivityDeps) => ({
  /**
   * One delivery attempt, at most once per (delivery, run, attempt): the attempt row is committed
   * before the POST, so a retried activity or a restarted worker finds it and records the earlier
   * outcome (or an interruption) instead of sending again.
   */
  async attemptWebhookDelivery(input: AttemptInput): Promise<AttemptOutcome> {
    const em = deps.orm.em.fork();
    const delivery = await em.findOne(Delivery, { id: input.deliveryId }, { populate: ['event'] });
    // A newer run (manual retry) or a finished run owns the delivery now.
    if (!delivery || delivery.run !== input.run || delivery.status !== 'pending') return 'stopped';
    const resolver = deps.destinations[delivery.destinationKind];
    const resolved = await resolver.resolve(em, deps.config, delivery.organization.id, delivery.destinationId);
    // A destination of the other environment never receives this environment's events (a guard behind emit's own check).
    const destination =
      resolved && resolved.policy.environment !== delivery.environment ? { ...resolved, inactiveReason: `destination is not a ${delivery.environment} destination` } : resolved;
    if (!destination || destination.inactiveReason) {
      await em.transactional(async (tx) => {
        await tx.nativeUpdate(
          Delivery,
          { id: delivery.id, run: input.run },
          { status: 'failed', errorMessage: destination?.inactiveReason ?? 'destination no longer exists', nextRetryAt: null, updatedAt: new Date() },
        );
      });
      return 'stopped';
    }

    const attemptedAt = new Date(input.attemptedAt);
    if (delivery.destinationKind === 'webhook' && !input.bypassCircuit && !(await mayAttempt(em, deps.config, delivery))) {
      await em.nativeUpdate(
        Delivery,
        { id: delivery.id, run: input.run },
        { errorMessage: PAUSED, nextRetryAt: new Date(attemptedAt.getTime() + PAUSED_CHECK_INTERVAL_MS), updatedAt: new Date() },
      );
      return 'paused';
    }
    const claimed = await em.transactional(async (tx) => {
      const rows = await tx.getConnection().execute<{ id: string }[]>(
        `insert into event_delivery_attempts (id, delivery_id, run, attempt, attempted_at) values (?, ?, ?, ?, ?)
         on conflict (delivery_id, run, attempt) do nothing returning id`,
        [prefixedId('dla'), delivery.id, input.run, input.attempt, attemptedAt],
        'all',
        tx.getTransactionContext(),
      );
      if (!rows[0]) return null;
      await tx.nativeUpdate(
        Delivery,
        { id: delivery.id },
        { attempts: delivery.attempts + 1, destinationUrl: destination.url, nextRetryAt: null, updatedAt: new Date() },
      );
      return rows[0].id;
    });

    let result: PostResult;
    if (claimed) {
      const body = deliveryPayload(delivery.event, destination.apiVersion);
      // Real time for the signature: receivers check it against their clock.
      const headers = signedHeaders(delivery.event.id, new Date(), body, destination.secrets);
      result = await postWebhook({ url: destination.url, body, headers, policy: destination.policy });
    } else {
      const earlier = await em.findOneOrFail(DeliveryAttempt, { delivery: delivery.id, run: input.run, attempt: input.attempt });
      if (earlier.completedAt) {
        result = { status: earlier.httpStatus ?? undefined, error: earlier.errorMessage ?? undefined, durationMs: earlier.durationMs ?? 0 };
      } else {
        result = { error: INTERRUPTED, durationMs: 0 };
      }
    }
    return recordOutcome(deps, delivery, input, result, (tx) => resolver.markGone(tx, delivery.destinationId, 'destination answered 410 Gone'));
  },
});

function classify(result: PostResult, input: AttemptInput): AttemptOutcome {
  if (result.status !== undefined && result.status >= 200 && result.status < 300) return 'delivered';
  if (result.status === 410) return 'gone';
  return input.nextRetryAt ? 'retry' : 'failed';
}

async function recordOutcome(
  deps: EventActivityDeps,
  delivery: Delivery,
  input: AttemptInput,
  result: PostResult,
  markGone: (tx: EntityManager) => Promise<void>,
): Promise<AttemptOutcome> {
  let outcome = classify(result, input);
  const error =
    result.error ?? (outcome === 'delivered' ? undefined : outcome === 'gone' ? 'destination answered 410 Gone; it was disabled' : `destination answered HTTP ${result.status}`);
  const attemptedAt = new Date(input.attemptedAt);
  let resumed: Delivery[] = [];
  await activityStarter(deps).transaction(deps.orm.em.fork(), async (tx) => {
    if (delivery.destinationKind === 'webhook' && (outcome === 'delivered' || outcome === 'retry' || outcome === 'failed')) {
      const circuit = await recordEndpointHealth(tx, deps.config, delivery, outcome === 'delivered', attemptedAt);
      if (circuit === 'disabled') outcome = 'failed';
      if (circuit === 'recovered') {
        // Paused deliveries have a workflow waiting to be woken; held ones get theirs now.
        resumed = await tx.find(Delivery, {
          destinationKind: 'webhook',
          destinationId: delivery.destinationId,
          status: 'pending',
          heldByCircuit: false,
          id: { $ne: delivery.id },
        });
        await releaseHeldDeliveries(tx, delivery.destinationId);
      } else if (outcome === 'failed' && circuit !== 'disabled') {
        await handOverProbe(tx, delivery);
      }
    }
    await tx.nativeUpdate(
      DeliveryAttempt,
      { delivery: delivery.id, run: input.run, attempt: input.attempt, completedAt: null },
      { httpStatus: result.status ?? null, errorMessage: error ?? null, durationMs: result.durationMs, completedAt: new Date() },
    );
    await tx.nativeUpdate(
      Delivery,
      { id: delivery.id, run: input.run },
      {
        status: outcome === 'delivered' ? 'delivered' : outcome === 'retry' ? 'pending' : 'failed',
        ...(result.status !== undefined ? { lastHttpStatus: result.status } : {}),
        ...(error ? { errorMessage: error } : {}),
        nextRetryAt: outcome === 'retry' ? new Date(input.nextRetryAt!) : null,
        ...(outcome === 'delivered' ? { deliveredAt: new Date(attemptedAt.getTime() + result.durationMs) } : {}),
        updatedAt: new Date(),
      },
    );
    if (outcome === 'gone') await markGone(tx);
  });
  // The probe succeeded: every delivery waiting on the endpoint attempts now, instead of at its next check.
  const starter = activityStarter(deps);
  for (const waiting of resumed) {
    await starter.signal(webhookDeliveryFlow.workflowId({ deliveryId: waiting.id, run: waiting.run, maxAttempts: null }), retryNowSignal);
  }
  return outcome;
}

/**
 * The run of `delivery` ended without success: if it was its endpoint's probe, the oldest delivery
 * held behind the circuit gets a workflow and becomes the probe, so the circuit keeps being probed
 * (and the endpoint is eventually disabled or recovers) however long no new event arrives.
 */
async function handOverProbe(tx: EntityManager, delivery: Delivery): Promise<void> {
  const endpoint = await tx.findOne(WebhookEndpoint, { id: delivery.destinationId, probeDeliveryId: delivery.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (!endpoint) return;
  const [next] = await releaseHeldDeliveries(tx, endpoint.id, 1);
  if (next) endpoint.probeDeliveryId = next.id;
}

/**
 * Counts the attempt in the endpoint's failure streak (or ends it). A streak older than
 * WEBHOOK_DISABLE_AFTER_HOURS (workflow time, like the schedule) disables the endpoint once, with a
 * `webhook_endpoint.disabled` event to the organization's other endpoints (emitted after the
 * disabling, so not to this one). `recovered`: a success ended a streak that had opened the circuit.
 */
async function recordEndpointHealth(
  tx: EntityManager,
  config: Config,
  delivery: Delivery,
  succeeded: boolean,
  attemptedAt: Date,
): Promise<'recovered' | 'disabled' | 'unchanged'> {
  const connection = tx.getConnection();
  const context = tx.getTransactionContext();
  if (succeeded) {
    const rows = await connection.execute<{ was_open: boolean }[]>(
      `update webhook_endpoints e set consecutive_failures = 0, failing_since = null, probe_delivery_id = null
       from (select id, consecutive_failures >= ? as was_open from webhook_endpoints where id = ? for update) before
       where e.id = before.id returning before.was_open`,
      [config.WEBHOOK_CIRCUIT_FAILURES, delivery.destinationId],
      'all',
      context,
    );
    return rows[0]?.was_open ? 'recovered' : 'unchanged';
  }
  const [streak] = await connection.execute<{ failing_since: Date }[]>(
    `update webhook_endpoints set consecutive_failures = consecutive_failures + 1, failing_since = coalesce(failing_since, ?)
     where id = ? returning failing_since`,
    [attemptedAt, delivery.destinationId],
    'all',
    context,
  );
  if (!streak || attemptedAt.getTime() - new Date(streak.failing_since).getTime() < config.WEBHOOK_DISABLE_AFTER_HOURS * HOUR_MS) return 'unchanged';
  const failingSince = new Date(streak.failing_since);
  const reason = `failing since ${failingSince.toISOString()} (more than ${config.WEBHOOK_DISABLE_AFTER_HOURS} h without a successful delivery); disabled automatically`;
  const disabled = await tx.nativeUpdate(
    WebhookEndpoint,
    { id: delivery.destinationId, status: 'enabled' },
    { status: 'disabled', disabledReason: reason, probeDeliveryId: null, updatedAt: new Date() },
  );
  if (disabled === 0) return 'unchanged';
  await failHeldDeliveries(tx, delivery.destinationId, 'webhook endpoint disabled automatically');
  const endpoint = await tx.findOneOrFail(WebhookEndpoint, { id: delivery.destinationId });
  await emit(tx, {
    organizationId: delivery.organization.id,
    environment: endpoint.environment,
    type: 'webhook_endpoint.disabled',
    data: { webhook_id: endpoint.id, url: endpoint.url, disabled_reason: reason, failing_since: failingSince.toISOString() },
    dedupeKey: `webhook_endpoint.disabled:${endpoint.id}:${failingSince.toISOString()}`,
  });
  return 'disabled';
}
