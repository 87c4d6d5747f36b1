import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { errors } from '../shared/errors';
import { recordStart } from '../temporal/starter';
import { webhookDeliveryFlow } from './flows/delivery';
import { Organization } from '../organizations/entities';
import { versionAtLeast } from '../shared/api-versions';
import { sql } from '../db/lean';
import { isUuid, prefixedId } from '../shared/ids';
import { iso, isoOrNull } from '../shared/time';
import type { Destination } from './destinations';
import { Delivery, DeliveryAttempt, type DestinationKind, Event, Subscription, WebhookEndpoint } from './entities';
import type { EventType } from './event-types';
import { DestinationRefused } from './url-policy';

/** Whose resources a lookup may see: one organization's, in one environment (an AuthContext is one). */
export interface Scope {
  organizationId: string;
  environment: Environment;
}

export interface EmitInput {
  organizationId: string;
  /** The environment of what the event reports (the card's, the invoice's...): only its endpoints receive it. */
  environment: Environment;
  type: EventType;
  data: Record<string, unknown>;
  /** Explicit destinations (a subscription, a card's webhook_url...), besides the endpoints. */
  destinations?: Destination[];
  /** false: only the explicit destinations (e.g. webhook.test); default: also every matching endpoint. */
  broadcast?: boolean;
  /** Emitting the same key twice in one organization yields one event and one set of deliveries. */
  dedupeKey?: string;
}

/**
 * The one way an event leaves a domain: writes the event and one delivery per destination in the
 * caller's transaction (a transactional outbox), with the start of each delivery's workflow
 * recorded beside it. Nothing is sent from here: the starter fires the delivery workflows after
 * commit, so a rolled-back change is never announced and a committed one is never lost (the start
 * sweep fires whatever the after-commit step missed).
 */
export async function emit(em: EntityManager, input: EmitInput): Promise<{ eventId: string; deliveries: Delivery[] }> {
  if (!em.getTransactionContext()) throw new Error('events.emit must run inside the transaction of the change it reports');
  const { organizationId, environment } = input;
  if (environment !== 'sandbox' && environment !== 'live') throw new Error(`events.emit needs the environment of what it reports, got ${String(environment)}`);
  const now = new Date();
  const inserted = await insertEvent(em, input, now);
  if (!inserted) {
    const existing = await em.findOneOrFail(Event, { organization: organizationId, dedupeKey: input.dedupeKey ?? null });
    return { eventId: existing.id, deliveries: [] };
  }

  const targets = new Map<string, { kind: DestinationKind; id: string; url: string; maxAttempts: number | null }>();
  // Endpoints with a probe: their circuit may be open, and a delivery behind an open circuit is held.
  const endpointsWithProbe: string[] = [];
  const addEndpoint = (endpoint: EndpointTarget) => {
    targets.set(`webhook:${endpoint.id}`, { kind: 'webhook', id: endpoint.id, url: endpoint.url, maxAttempts: endpoint.maxAttempts ?? null });
    if (endpoint.probeDeliveryId) endpointsWithProbe.push(endpoint.id);
  };
  for (const endpoint of inserted.endpoints) {
    // An empty filter delivers every type (the spec), the payout stages' `withdrawal.*` aliases included.
    if (endpoint.eventTypes.length === 0 || endpoint.eventTypes.includes(input.type)) addEndpoint(endpoint);
  }
  // Explicit destinations must be of the event's environment too: a sandbox event never reaches a live URL.
  const ofAnotherEnvironment = (kind: string, id: string) => new Error(`events.emit: ${kind} ${id} is not a ${environment} destination of this organization`);
  for (const destination of input.destinations ?? []) {
    if (destination.kind === 'webhook') {
      const endpoint = await em.findOneOrFail(WebhookEndpoint, { id: destination.id, organization: organizationId, environment }, { failHandler: () => ofAnotherEnvironment('webhook', destination.id) });
      if (!targets.has(`webhook:${endpoint.id}`)) addEndpoint(endpoint);
    } else if (destination.kind === 'subscription') {
      const subscription = await em.findOneOrFail(Subscription, { id: destination.id, organization: organizationId, environment }, { failHandler: () => ofAnotherEnvironment('subscription', destination.id) });
      if (subscription.eventType && subscription.eventType !== input.type) continue;
      subscription.lastEventAt = now;
      targets.set(`subscription:${subscription.id}`, {
        kind: 'subscription',
        id: subscription.id,
        url: subscription.webhookUrl,
        maxAttempts: subscription.maxAttempts ?? null,
      });
    } else if (destination.kind === 'card') {
      targets.set(`${destination.kind}:${destination.id}`, { kind: destination.kind, id: destination.id, url: destination.url, maxAttempts: null });
    }
  }

  if (targets.size === 0) return { eventId: inserted.eventId, deliveries: [] };
  const held = await endpointsWithOpenCircuit(em, endpointsWithProbe);
  // The event was inserted above: the deliveries need only references (the entity manager's, made once per id).
  const organization = em.getReference(Organization, organizationId);
  const event = em.getReference(Event, inserted.eventId);
  const deliveries = [...targets.values()].map((target) =>
    em.create(Delivery, {
      organization,
      environment,
      event,
      type: input.type,
      destinationKind: target.kind,
      destinationId: target.id,
      destinationUrl: target.url,
      maxAttempts: target.maxAttempts,
      heldByCircuit: target.kind === 'webhook' && held.has(target.id),
      createdAt: now,
      updatedAt: now,
    }),
  );
  for (const delivery of deliveries) if (!delivery.heldByCircuit) recordDeliveryStart(em, delivery);
  return { eventId: inserted.eventId, deliveries };
}

/** What a delivery needs of an endpoint. */
type EndpointTarget = Pick<WebhookEndpoint, 'id' | 'url' | 'maxAttempts' | 'probeDeliveryId' | 'eventTypes'>;

/**
 * Inserts the event and, in the same statement, reads the enabled endpoints of its organization and
 * environment (when it is broadcast): one round trip where a dedupe lookup, the insert and the
 * endpoints' read were three. An event whose dedupe key is taken inserts nothing and returns null.
 * A concurrent emit of the same key waits for the first to commit, then inserts nothing.
 */
async function insertEvent(em: EntityManager, input: EmitInput, now: Date): Promise<{ eventId: string; endpoints: EndpointTarget[] } | null> {
  const eventId = prefixedId('evt');
  const broadcast = input.broadcast !== false;
  const rows = await sql<{ event_id: string; id: string | null; url: string; max_attempts: number | null; probe_delivery_id: string | null; event_types: string[] }>(
    em,
    `with inserted as (
       insert into events (id, organization_id, environment, type, data, dedupe_key, created_at) values ($1, $2, $3, $4, $5::jsonb, $6, $7)
       on conflict (organization_id, dedupe_key) do nothing returning id
     )
     select inserted.id as event_id, e.id, e.url, e.max_attempts, e.probe_delivery_id, e.event_types
     from inserted left join webhook_endpoints e
       on $8 and e.organization_id = $9 and e.environment = $10 and e.status = 'enabled' and e.deleted_at is null`,
    [eventId, input.organizationId, input.environment, input.type, JSON.stringify(input.data), input.dedupeKey ?? null, now, broadcast, input.organizationId, input.environment],
  );
  if (rows.length === 0) return null;
  const endpoints = rows
    .filter((row): row is typeof row & { id: string } => row.id !== null)
    .map((row) => ({ id: row.id, url: row.url, maxAttempts: row.max_attempts, probeDeliveryId: row.probe_delivery_id, eventTypes: row.event_types }));
  return { eventId, endpoints };
}

/**
 * Which of these endpoints have their circuit open: a probe delivery still pending (as mayAttempt
 * judges it). The rows are share-locked until the caller commits, so whatever closes the circuit or
 * ends the endpoint (each writes the endpoint row first) either waits for this transaction and then
 * sees what it held, or commits first and is seen here (nothing is held then).
 */
async function endpointsWithOpenCircuit(em: EntityManager, endpointIds: string[]): Promise<Set<string>> {
  if (endpointIds.length === 0) return new Set();
  const rows = await em.execute<{ id: string }[]>(
    `select e.id from webhook_endpoints e join event_deliveries d on d.id = e.probe_delivery_id and d.status = 'pending'
     where e.id = any(?::text[]) and e.status = 'enabled' and e.deleted_at is null for share of e`,
    [`{${endpointIds.join(',')}}`],
  );
  return new Set(rows.map((row) => row.id));
}

/**
 * The endpoint's circuit closed (its probe succeeded, or it was re-enabled by hand): every delivery
 * held behind it gets its workflow, started once the transaction commits. `limit`: only the oldest.
 */
export async function releaseHeldDeliveries(em: EntityManager, endpointId: string, limit?: number): Promise<Delivery[]> {
  const held = await em.find(
    Delivery,
    { destinationKind: 'webhook', destinationId: endpointId, status: 'pending', heldByCircuit: true },
    { orderBy: { createdAt: 'asc', id: 'asc' }, ...(limit ? { limit } : {}) },
  );
  for (const delivery of held) {
    delivery.heldByCircuit = false;
    delivery.updatedAt = new Date();
    recordDeliveryStart(em, delivery);
  }
  return held;
}

/** The endpoint was disabled or deleted while its circuit was open: what it held ends failed, never attempted. */
export async function failHeldDeliveries(em: EntityManager, endpointId: string, reason: string): Promise<number> {
  return em.nativeUpdate(
    Delivery,
    { destinationKind: 'webhook', destinationId: endpointId, status: 'pending', heldByCircuit: true },
    { status: 'failed', heldByCircuit: false, errorMessage: `${reason} while its circuit was open; not attempted`, nextRetryAt: null, updatedAt: new Date() },
  );
}

/** The delivery's current run starts once the transaction commits. */
function recordDeliveryStart(em: EntityManager, delivery: Delivery): void {
  recordStart(em, webhookDeliveryFlow, { deliveryId: delivery.id, run: delivery.run, maxAttempts: delivery.maxAttempts ?? null }, delivery.organization.id);
}

/** Manual retry of a finished (or held) delivery: a new run of attempts with a fresh schedule, attempting even behind an open circuit. */
export function requeueDelivery(em: EntityManager, delivery: Delivery): void {
  delivery.run += 1;
  delivery.status = 'pending';
  delivery.heldByCircuit = false;
  delivery.nextRetryAt = null;
  delivery.updatedAt = new Date();
  recordDeliveryStart(em, delivery);
}

/** The JSON body posted for `event` at `apiVersion`; versions before 2026-05-15 have no event_id. */
export function deliveryPayload(event: Event, apiVersion: string): string {
  return JSON.stringify({
    ...(versionAtLeast(apiVersion, '2026-05-15') ? { event_id: event.id } : {}),
    type: event.type,
    api_version: apiVersion,
    created_at: iso(event.createdAt),
    data: event.data,
  });
}

/** Turns a refused URL into the contract's validation error on `param`. */
export async function validatedUrl(param: string, check: () => Promise<URL>): Promise<string> {
  try {
    return (await check()).toString();
  } catch (error) {
    if (error instanceof DestinationRefused) throw errors.validation(`Invalid ${param}: ${error.message}.`, param);
    throw error;
  }
}

export async function findWebhook(em: EntityManager, scope: Scope, id: string): Promise<WebhookEndpoint> {
  const endpoint = await em.findOne(WebhookEndpoint, { id, organization: scope.organizationId, environment: scope.environment, deletedAt: null });
  if (!endpoint) throw errors.notFound('webhook', id);
  return endpoint;
}

export async function findSubscription(em: EntityManager, scope: Scope, id: string): Promise<Subscription> {
  const subscription = await em.findOne(Subscription, { id, organization: scope.organizationId, environment: scope.environment, deletedAt: null });
  if (!subscription) throw errors.notFound('subscription', id);
  return subscription;
}

/**
 * A delivery by its own id (`dlv_`), or by the id of the event it carries (`evt_`) when the event went
 * to that one destination: what a retry acts on. An event that went to several destinations names
 * them in a 409 (a retry is of one delivery; reading the event is `findEvent`'s).
 */
export async function findDelivery(em: EntityManager, scope: Scope, id: string): Promise<Delivery> {
  // Ids are prefixed; anything else (a uuid included) is simply not found.
  if (isUuid(id)) throw errors.notFound('event', id);
  const scoped = { organization: scope.organizationId, environment: scope.environment };
  if (!isEventId(id)) {
    const delivery = await em.findOne(Delivery, { id, ...scoped }, { populate: ['event'] });
    if (!delivery) throw errors.notFound('event', id);
    return delivery;
  }
  const deliveries = await eventDeliveries(em, scope, id);
  // An event no destination matched (or another scope's) has no delivery to act on.
  if (deliveries.length === 0) throw errors.notFound('delivery', id);
  if (deliveries.length > 1) {
    throw errors.conflict(
      'event_id_ambiguous',
      `Event ${id} went to ${deliveries.length} destinations; retry one delivery by its id (dlv_...) from details.deliveries or GET /v1/events/${id}.`,
      { event_id: id, deliveries: deliveries.map((delivery) => ({ id: delivery.id, webhook_id: delivery.destinationId })) },
    );
  }
  return deliveries[0]!;
}

/** An event's id (`evt_`, the payload's event_id and the webhook-id header), as opposed to a delivery's (`dlv_`). */
export const isEventId = (id: string): boolean => id.startsWith('evt_');

/** The event itself, in the caller's organization and environment, with its deliveries (oldest first; none when no destination matched). */
export async function findEvent(em: EntityManager, scope: Scope, id: string): Promise<{ event: Event; deliveries: Delivery[] }> {
  const event = await em.findOne(Event, { id, organization: scope.organizationId, environment: scope.environment });
  if (!event) throw errors.notFound('event', id);
  return { event, deliveries: await eventDeliveries(em, scope, id) };
}

function eventDeliveries(em: EntityManager, scope: Scope, eventId: string): Promise<Delivery[]> {
  return em.find(Delivery, { event: eventId, organization: scope.organizationId, environment: scope.environment }, { populate: ['event'], orderBy: { createdAt: 'asc', id: 'asc' } });
}

export function presentWebhook(endpoint: WebhookEndpoint, signingSecret?: string) {
  return {
    id: endpoint.id,
    object: 'webhook' as const,
    name: endpoint.name,
    url: endpoint.url,
    event_types: endpoint.eventTypes,
    status: endpoint.status,
    ...(endpoint.disabledReason ? { disabled_reason: endpoint.disabledReason } : {}),
    api_version: endpoint.apiVersion,
    ...(endpoint.maxAttempts ? { max_attempts: endpoint.maxAttempts } : {}),
    has_signing_secret: Boolean(endpoint.secrets.current),
    ...(signingSecret ? { signing_secret: signingSecret } : {}),
    created_at: iso(endpoint.createdAt),
    updated_at: iso(endpoint.updatedAt),
  };
}

export function presentSubscription(subscription: Subscription, signingSecret?: string) {
  return {
    id: subscription.id,
    object: 'subscription' as const,
    address: subscription.address,
    chain: subscription.chain,
    network: subscription.network,
    webhook_url: subscription.webhookUrl,
    event_type: subscription.eventType,
    label: subscription.label ?? null,
    metadata: subscription.metadata,
    status: subscription.status,
    ...(subscription.status === 'failed' && subscription.failureReason ? { failure_reason: subscription.failureReason } : {}),
    has_signing_secret: Boolean(subscription.secrets.current),
    ...(signingSecret ? { signing_secret: signingSecret } : {}),
    ...(subscription.maxAttempts ? { max_attempts: subscription.maxAttempts } : {}),
    last_event_at: isoOrNull(subscription.lastEventAt),
    created_at: iso(subscription.createdAt),
    updated_at: iso(subscription.updatedAt),
  };
}

export function presentDelivery(delivery: Delivery, attempts?: DeliveryAttempt[]) {
  return {
    id: delivery.id,
    object: 'event' as const,
    event_id: delivery.event.id,
    webhook_id: delivery.destinationId,
    destination_type: delivery.destinationKind,
    type: delivery.type,
    destination: delivery.destinationUrl,
    delivery_status: delivery.status,
    delivery_attempts: delivery.attempts,
    ...(delivery.maxAttempts ? { max_attempts: delivery.maxAttempts } : {}),
    ...(delivery.lastHttpStatus != null ? { http_status_code: delivery.lastHttpStatus } : {}),
    ...(delivery.errorMessage ? { error_message: delivery.errorMessage } : {}),
    ...(delivery.nextRetryAt ? { next_retry_at: iso(delivery.nextRetryAt) } : {}),
    ...(delivery.deliveredAt ? { delivered_at: iso(delivery.deliveredAt) } : {}),
    created_at: iso(delivery.createdAt),
    updated_at: iso(delivery.updatedAt),
    ...(attempts
      ? {
          attempts: attempts.map((attempt) => ({
            run: attempt.run,
            attempt: attempt.attempt,
            attempted_at: iso(attempt.attemptedAt),
            ...(attempt.httpStatus != null ? { http_status_code: attempt.httpStatus } : {}),
            ...(attempt.errorMessage ? { error_message: attempt.errorMessage } : {}),
            ...(attempt.durationMs != null ? { duration_ms: attempt.durationMs } : {}),
          })),
        }
      : {}),
  };
}

/**
 * The event itself, as Stripe's event object is: what every destination received (`type`,
 * `created_at`, `data`; `id` is the payload's event_id and the webhook-id header) and one delivery
 * per destination, each as GET /v1/events lists it (its attempts are on GET /v1/events/dlv_...).
 */
export function presentEvent(event: Event, deliveries: Delivery[]) {
  return {
    id: event.id,
    object: 'webhook_event' as const,
    type: event.type,
    created_at: iso(event.createdAt),
    data: event.data,
    deliveries: deliveries.map((delivery) => presentDelivery(delivery)),
  };
}
