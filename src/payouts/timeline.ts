import type { EntityManager } from '@mikro-orm/postgresql';
import { uuid } from '../shared/ids';
import type { PayoutTrip } from './entities';

/**
 * Adds an entry to a trip's timeline once: `key` is unique per trip, so a retried step that records
 * the same moment again changes nothing.
 */
export async function recordTransition(em: EntityManager, trip: PayoutTrip, name: string, key: string, details: Record<string, unknown> = {}): Promise<void> {
  await em.execute(
    `insert into payout_trip_transitions (id, trip_id, name, key, details, occurred_at) values (?, ?, ?, ?, ?, clock_timestamp()) on conflict (trip_id, key) do nothing`,
    [uuid(), trip.id, name, key, JSON.stringify(details)],
  );
}
