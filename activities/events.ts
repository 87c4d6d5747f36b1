import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import type { DestinationResolvers } from '../src/events/destinations';
import { Delivery, DeliveryAttempt } from '../src/events/entities';
import { signedHeaders } from '../src/events/secrets';
import { postWebhook, type PostResult } from '../src/events/sender';
import { deliveryPayload } from '../src/events/service';
import type { Logger } from '../src/logger';
import { prefixedId } from '../src/shared/ids';

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
}

/** delivered; retry: failed, another attempt is scheduled; failed: the run is over; gone: 410, destination disabled; stopped: nothing was sent. */
export type AttemptOutcome = 'delivered' | 'retry' | 'failed' | 'gone' | 'stopped';

const INTERRUPTED = 'attempt interrupted before its outcome was recorded; not resent';

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
  const outcome = classify(result, input);
  const error =
    result.error ?? (outcome === 'delivered' ? undefined : outcome === 'gone' ? 'destination answered 410 Gone; it was disabled' : `destination answered HTTP ${result.status}`);
  const attemptedAt = new Date(input.attemptedAt);
  await deps.orm.em.fork().transactional(async (tx) => {
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
  return outcome;
}
