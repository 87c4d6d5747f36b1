import type { EntityManager } from '@mikro-orm/postgresql';
import { Event } from '../../src/events/entities';

/**
 * A payout trip's events in the order they were emitted. An alias (`withdrawal.*`, data.alias_of) is
 * emitted right after its event, often in the same millisecond, and event ids are random: within one
 * millisecond the event comes first, its alias after.
 */
export async function tripEvents(em: EntityManager, organizationId: string, tripId: string): Promise<Event[]> {
  const events = await em.find(Event, { organization: organizationId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  const isAlias = (event: Event) => ((event.data as { alias_of?: string }).alias_of ? 1 : 0);
  return events
    .filter((event) => (event.data as { tripId?: string }).tripId === tripId)
    .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || isAlias(a) - isAlias(b));
}
