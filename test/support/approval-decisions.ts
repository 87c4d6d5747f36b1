import type { FilterQuery } from '@mikro-orm/postgresql';
import { Event } from '../../src/events/entities';
import { testOrm } from './environment';

export const APPROVAL_DECISION_EVENTS = ['approval_request.approved', 'approval_request.rejected', 'approval_request.expired'];

/** The approval_request.approved / .rejected / .expired events `where` selects, oldest first: where each went and what it says. */
export async function approvalDecisionEvents(where: FilterQuery<Event>) {
  const events = await (await testOrm()).em.fork().find(Event, { $and: [where, { type: { $in: APPROVAL_DECISION_EVENTS } }] }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  return events.map((event) => ({ id: event.id, type: event.type, organization: event.organization.id, environment: event.environment, request: event.data.id, status: event.data.status }));
}

/**
 * The decision events of an organization where one request was decided, as [type, environment, the
 * status its data gives]: a request decided once shows one row, and an event about any other
 * request shows as such.
 */
export async function decisionsOf(organizationId: string, approvalRequestId: string) {
  return (await approvalDecisionEvents({ organization: organizationId })).map((event) => [event.type, event.environment, event.request === approvalRequestId ? event.status : 'another request']);
}
