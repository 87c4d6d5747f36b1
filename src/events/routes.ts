import type { FilterQuery } from '@mikro-orm/postgresql';
import { errors } from '../shared/errors';
import type { RouteRegistry } from '../http/route';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema, z } from '../shared/schemas';
import { Delivery, DeliveryAttempt } from './entities';
import { EVENT_TYPES } from './event-types';
import { retryNowSignal, webhookDeliveryFlow } from './flows/delivery';
import { DeliveryEventObject, EventListQuery, EventRetryObject, EventTypeList, IdParams, WebhookEventObject } from './schemas';
import { emit, findDelivery, findEvent, findWebhook, isEventId, presentDelivery, presentEvent, requeueDelivery } from './service';
import { registerSignedDestinationRoutes, subscriptionRoutes, webhookRoutes } from './signed-destination-routes';

export function registerEventRoutes(routes: RouteRegistry): void {
  // Before /v1/webhooks/:id, which would otherwise take `event-types` for an id.
  registerEventTypeRoute(routes);
  registerSignedDestinationRoutes(routes, webhookRoutes);
  routes.add({
    method: 'post',
    path: '/v1/webhooks/:id/test',
    operationId: 'testWebhook',
    summary: 'Send a webhook.test event to this endpoint only',
    tag: webhookRoutes.tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 201, description: 'The queued delivery event', schema: DeliveryEventObject },
    handler: async ({ auth, em, params }) => {
      const endpoint = await findWebhook(em, auth, params.id);
      if (endpoint.status !== 'enabled') throw errors.conflict('webhook_disabled', 'This webhook endpoint is disabled; enable it with PATCH first.');
      const { deliveries } = await emit(em, {
        organizationId: auth.organizationId,
        environment: endpoint.environment,
        type: 'webhook.test',
        data: { webhook_id: endpoint.id, message: 'This is a test event.' },
        destinations: [{ kind: 'webhook', id: endpoint.id }],
        broadcast: false,
      });
      await em.flush();
      return { status: 201, body: presentDelivery(deliveries[0]!) };
    },
  });
  registerSignedDestinationRoutes(routes, subscriptionRoutes);
  registerDeliveryRoutes(routes);
}

function registerEventTypeRoute(routes: RouteRegistry): void {
  routes.add({
    method: 'get',
    path: '/v1/webhooks/event-types',
    operationId: 'listEventTypes',
    summary: 'List the event types usable in an event_types filter',
    tag: 'Webhooks',
    scope: 'webhooks:read',
    response: { status: 200, description: 'Every event type the service emits', schema: EventTypeList },
    handler: async () => ({
      body: {
        object: 'list',
        data: EVENT_TYPES.map((entry) => ({ object: 'event_type', type: entry.type, description: entry.description })),
        has_more: false,
        next_cursor: null,
      },
    }),
  });
}

function registerDeliveryRoutes(routes: RouteRegistry): void {
  const tag = 'Events';

  routes.add({
    method: 'get',
    path: '/v1/events',
    operationId: 'listEvents',
    summary: 'List delivery events',
    description: 'Filters combine: `event_id` (evt_..., one delivery per destination the event went to), `webhook_id`, `delivery_status`, `type`.',
    tag,
    scope: 'webhooks:read',
    query: EventListQuery,
    response: { status: 200, description: 'A page of delivery events, newest first', schema: listEnvelopeSchema(DeliveryEventObject) },
    handler: async ({ auth, em, query }) => {
      const where: FilterQuery<Delivery> = { organization: auth.organizationId, environment: auth.environment };
      if (query.webhook_id) where.destinationId = query.webhook_id;
      if (query.event_id) where.event = query.event_id;
      if (query.delivery_status) where.status = query.delivery_status;
      if (query.type) where.type = query.type;
      const page = await paginate(em, Delivery, where, query, ['event']);
      return { body: listBody(page, (delivery) => presentDelivery(delivery)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/events/:id',
    operationId: 'getEvent',
    summary: 'Retrieve an event with its deliveries, or one delivery with its attempts',
    description:
      'By the event id a receiver sees (evt_..., payload event_id and webhook-id header): the event itself (`webhook_event`: type, created_at, data) with one delivery per destination it went to, whether none, one or several. By a delivery id (dlv_...): that delivery event with every attempt.',
    tag,
    scope: 'webhooks:read',
    params: IdParams,
    response: { status: 200, description: 'The event (evt_...) or the delivery event (dlv_...)', schema: z.union([WebhookEventObject, DeliveryEventObject]) },
    handler: async ({ auth, em, params }) => {
      if (isEventId(params.id)) {
        const { event, deliveries } = await findEvent(em, auth, params.id);
        return { body: presentEvent(event, deliveries) };
      }
      const delivery = await findDelivery(em, auth, params.id);
      const attempts = await em.find(DeliveryAttempt, { delivery }, { orderBy: { run: 'asc', attempt: 'asc' } });
      return { body: presentDelivery(delivery, attempts) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/events/:id/retry',
    operationId: 'retryEvent',
    summary: 'Re-queue a delivery',
    description:
      'A delivered or failed delivery, or one held behind its endpoint\'s open circuit, starts a new run of attempts with a fresh schedule; a pending one is attempted now instead of at next_retry_at. Takes the delivery id, or the event id of an event that went to one destination; an event that went to several answers 409 `event_id_ambiguous` naming each delivery (details.deliveries).',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 202, description: 'Queued', schema: EventRetryObject },
    handler: async ({ auth, em, params, deps }) => {
      const delivery = await findDelivery(em, auth, params.id);
      // A held delivery has no workflow to wake: it gets one, attempting despite the circuit, as a finished one does.
      if (delivery.status !== 'pending' || delivery.heldByCircuit) {
        requeueDelivery(em, delivery);
        await em.flush();
      } else {
        // No workflow to wake (not started yet, or finishing between the read and the signal): its start or outcome covers it.
        await deps.starter.signal(webhookDeliveryFlow.workflowId({ deliveryId: delivery.id, run: delivery.run, maxAttempts: null }), retryNowSignal);
      }
      return { status: 202, body: { object: 'event_retry', status: 'queued' } };
    },
  });
}
