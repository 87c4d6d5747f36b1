import type { FilterQuery } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import { findChain, networkFor } from '../catalogue/service';
import type { Config } from '../config';
import { errors } from '../shared/errors';
import type { RouteRegistry } from '../http/route';
import { Organization } from '../organizations/entities';
import { ListQuery, listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { Delivery, DeliveryAttempt, Subscription, WebhookEndpoint } from './entities';
import { EVENT_TYPES } from './event-types';
import { retryNowSignal, webhookDeliveryFlow } from './flows/delivery';
import {
  CreateSubscriptionBody,
  CreateWebhookBody,
  DeletedObject,
  DeliveryEventObject,
  EventListQuery,
  EventRetryObject,
  EventTypeList,
  IdParams,
  SigningSecretObject,
  SubscriptionObject,
  UpdateSubscriptionBody,
  UpdateWebhookBody,
  WebhookObject,
} from './schemas';
import { newSigningSecrets, rotateSigningSecrets } from './secrets';
import {
  emit,
  findDelivery,
  findSubscription,
  findWebhook,
  presentDelivery,
  presentSubscription,
  presentWebhook,
  requeueDelivery,
  validatedUrl,
} from './service';
import { checkDestinationUrl } from './url-policy';

const urlPolicy = (config: Config, environment: Environment) => ({ environment, allowInsecureLoopback: config.WEBHOOK_ALLOW_INSECURE_LOOPBACK });

export function registerEventRoutes(routes: RouteRegistry): void {
  registerWebhookRoutes(routes);
  registerSubscriptionRoutes(routes);
  registerDeliveryRoutes(routes);
}

function registerWebhookRoutes(routes: RouteRegistry): void {
  const tag = 'Webhooks';

  // Before /v1/webhooks/:id, which would otherwise take `event-types` for an id.
  routes.add({
    method: 'get',
    path: '/v1/webhooks/event-types',
    operationId: 'listEventTypes',
    summary: 'List the event types usable in an event_types filter',
    tag,
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

  routes.add({
    method: 'post',
    path: '/v1/webhooks',
    operationId: 'createWebhook',
    summary: 'Create a webhook endpoint (the signing secret is shown once)',
    tag,
    scope: 'webhooks:write',
    body: CreateWebhookBody,
    response: { status: 201, description: 'The new endpoint with its signing secret', schema: WebhookObject },
    handler: async ({ auth, em, body, deps }) => {
      const url = await validatedUrl('url', () => checkDestinationUrl(body.url, urlPolicy(deps.config, auth.environment)));
      const { secrets, plaintext } = newSigningSecrets();
      const endpoint = em.create(WebhookEndpoint, {
        organization: em.getReference(Organization, auth.organizationId),
        environment: auth.environment,
        name: body.name,
        url,
        eventTypes: [...new Set(body.event_types)],
        apiVersion: auth.apiVersion,
        maxAttempts: body.max_attempts ?? null,
        secrets,
      });
      await em.flush();
      return { status: 201, body: presentWebhook(endpoint, plaintext) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/webhooks',
    operationId: 'listWebhooks',
    summary: 'List webhook endpoints',
    tag,
    scope: 'webhooks:read',
    query: ListQuery,
    response: { status: 200, description: 'A page of endpoints, newest first', schema: listEnvelopeSchema(WebhookObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, WebhookEndpoint, { organization: auth.organizationId, deletedAt: null }, query);
      return { body: listBody(page, (endpoint) => presentWebhook(endpoint)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/webhooks/:id',
    operationId: 'getWebhook',
    summary: 'Retrieve a webhook endpoint',
    tag,
    scope: 'webhooks:read',
    params: IdParams,
    response: { status: 200, description: 'The endpoint', schema: WebhookObject },
    handler: async ({ auth, em, params }) => ({ body: presentWebhook(await findWebhook(em, auth.organizationId, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/v1/webhooks/:id',
    operationId: 'updateWebhook',
    summary: 'Update a webhook endpoint; omitted fields are unchanged',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    body: UpdateWebhookBody,
    response: { status: 200, description: 'The updated endpoint', schema: WebhookObject },
    handler: async ({ auth, em, params, body, deps }) => {
      const endpoint = await findWebhook(em, auth.organizationId, params.id);
      if (body.url !== undefined) {
        endpoint.url = await validatedUrl('url', () => checkDestinationUrl(body.url!, urlPolicy(deps.config, endpoint.environment)));
      }
      if (body.name !== undefined) endpoint.name = body.name;
      if (body.event_types !== undefined) endpoint.eventTypes = [...new Set(body.event_types)];
      if (body.max_attempts !== undefined) endpoint.maxAttempts = body.max_attempts;
      if (body.status !== undefined) {
        endpoint.status = body.status;
        endpoint.disabledReason = null;
      }
      endpoint.updatedAt = new Date();
      await em.flush();
      return { body: presentWebhook(endpoint) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/v1/webhooks/:id',
    operationId: 'deleteWebhook',
    summary: 'Delete a webhook endpoint; its pending deliveries stop',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 200, description: 'The deleted endpoint', schema: DeletedObject },
    handler: async ({ auth, em, params }) => {
      const endpoint = await findWebhook(em, auth.organizationId, params.id);
      endpoint.deletedAt = new Date();
      await em.flush();
      return { body: { id: endpoint.id, object: 'webhook', deleted: true } };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/webhooks/:id/rotate-secret',
    operationId: 'rotateWebhookSecret',
    summary: 'Rotate the signing secret; the previous one keeps signing for the rotation window',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 200, description: 'The new secret, shown only here', schema: SigningSecretObject },
    handler: async ({ auth, em, params, deps }) => {
      const endpoint = await findWebhook(em, auth.organizationId, params.id);
      const plaintext = rotateSigningSecrets(endpoint.secrets, deps.config.WEBHOOK_SECRET_ROTATION_HOURS);
      endpoint.updatedAt = new Date();
      await em.flush();
      return {
        body: {
          object: 'signing_secret',
          signing_secret: plaintext,
          previous_secret_expires_at: endpoint.secrets.previousExpiresAt?.toISOString() ?? null,
        },
      };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/webhooks/:id/test',
    operationId: 'testWebhook',
    summary: 'Send a webhook.test event to this endpoint only',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 201, description: 'The queued delivery event', schema: DeliveryEventObject },
    handler: async ({ auth, em, params }) => {
      const endpoint = await findWebhook(em, auth.organizationId, params.id);
      if (endpoint.status !== 'enabled') throw errors.conflict('webhook_disabled', 'This webhook endpoint is disabled; enable it with PATCH first.');
      const { deliveries } = await emit(em, {
        organizationId: auth.organizationId,
        type: 'webhook.test',
        data: { webhook_id: endpoint.id, message: 'This is a test event.' },
        destinations: [{ kind: 'webhook', id: endpoint.id }],
        broadcast: false,
      });
      await em.flush();
      return { status: 201, body: presentDelivery(deliveries[0]!) };
    },
  });
}

function registerSubscriptionRoutes(routes: RouteRegistry): void {
  const tag = 'Subscriptions';

  routes.add({
    method: 'post',
    path: '/v1/subscriptions',
    operationId: 'createSubscription',
    summary: 'Watch an on-chain address (the signing secret is shown once)',
    tag,
    scope: 'webhooks:write',
    body: CreateSubscriptionBody,
    response: { status: 201, description: 'The new subscription with its signing secret', schema: SubscriptionObject },
    handler: async ({ auth, em, body, deps }) => {
      const url = await validatedUrl('webhook_url', () => checkDestinationUrl(body.webhook_url, urlPolicy(deps.config, auth.environment)));
      const { secrets, plaintext } = newSigningSecrets();
      const subscription = em.create(Subscription, {
        organization: em.getReference(Organization, auth.organizationId),
        environment: auth.environment,
        address: body.address,
        chain: body.chain,
        // The environment decides the network; a contradicting request value is ignored (deprecated field).
        network: networkFor(findChain(body.chain), auth.environment),
        webhookUrl: url,
        eventType: body.event_type,
        label: body.label ?? null,
        metadata: body.metadata,
        apiVersion: auth.apiVersion,
        maxAttempts: body.max_attempts ?? null,
        secrets,
      });
      await em.flush();
      return { status: 201, body: presentSubscription(subscription, plaintext) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/subscriptions',
    operationId: 'listSubscriptions',
    summary: 'List subscriptions',
    tag,
    scope: 'webhooks:read',
    query: ListQuery,
    response: { status: 200, description: 'A page of subscriptions, newest first', schema: listEnvelopeSchema(SubscriptionObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, Subscription, { organization: auth.organizationId, deletedAt: null }, query);
      return { body: listBody(page, (subscription) => presentSubscription(subscription)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/subscriptions/:id',
    operationId: 'getSubscription',
    summary: 'Retrieve a subscription',
    tag,
    scope: 'webhooks:read',
    params: IdParams,
    response: { status: 200, description: 'The subscription', schema: SubscriptionObject },
    handler: async ({ auth, em, params }) => ({ body: presentSubscription(await findSubscription(em, auth.organizationId, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/v1/subscriptions/:id',
    operationId: 'updateSubscription',
    summary: 'Update a subscription; omitted fields are unchanged',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    body: UpdateSubscriptionBody,
    response: { status: 200, description: 'The updated subscription', schema: SubscriptionObject },
    handler: async ({ auth, em, params, body, deps }) => {
      const subscription = await findSubscription(em, auth.organizationId, params.id);
      if (body.webhook_url !== undefined) {
        subscription.webhookUrl = await validatedUrl('webhook_url', () =>
          checkDestinationUrl(body.webhook_url!, urlPolicy(deps.config, subscription.environment)),
        );
      }
      if (body.event_type !== undefined) subscription.eventType = body.event_type;
      if (body.label !== undefined) subscription.label = body.label;
      if (body.metadata !== undefined) subscription.metadata = body.metadata;
      if (body.max_attempts !== undefined) subscription.maxAttempts = body.max_attempts;
      if (body.status !== undefined) {
        subscription.status = body.status;
        subscription.failureReason = null;
      }
      subscription.updatedAt = new Date();
      await em.flush();
      return { body: presentSubscription(subscription) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/v1/subscriptions/:id',
    operationId: 'deleteSubscription',
    summary: 'Delete a subscription; its pending deliveries stop',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 200, description: 'The deleted subscription', schema: DeletedObject },
    handler: async ({ auth, em, params }) => {
      const subscription = await findSubscription(em, auth.organizationId, params.id);
      subscription.deletedAt = new Date();
      await em.flush();
      return { body: { id: subscription.id, object: 'subscription', deleted: true } };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/subscriptions/:id/rotate-secret',
    operationId: 'rotateSubscriptionSecret',
    summary: 'Rotate the signing secret; the previous one keeps signing for the rotation window',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 200, description: 'The subscription with its new secret, shown only here', schema: SubscriptionObject },
    handler: async ({ auth, em, params, deps }) => {
      const subscription = await findSubscription(em, auth.organizationId, params.id);
      const plaintext = rotateSigningSecrets(subscription.secrets, deps.config.WEBHOOK_SECRET_ROTATION_HOURS);
      subscription.updatedAt = new Date();
      await em.flush();
      return { body: presentSubscription(subscription, plaintext) };
    },
  });
}

function registerDeliveryRoutes(routes: RouteRegistry): void {
  const tag = 'Events';

  routes.add({
    method: 'get',
    path: '/v1/events',
    operationId: 'listEvents',
    summary: 'List delivery events',
    tag,
    scope: 'webhooks:read',
    query: EventListQuery,
    response: { status: 200, description: 'A page of delivery events, newest first', schema: listEnvelopeSchema(DeliveryEventObject) },
    handler: async ({ auth, em, query }) => {
      const where: FilterQuery<Delivery> = { organization: auth.organizationId };
      if (query.webhook_id) where.destinationId = query.webhook_id;
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
    summary: 'Retrieve a delivery event with its attempts',
    tag,
    scope: 'webhooks:read',
    params: IdParams,
    response: { status: 200, description: 'The delivery event', schema: DeliveryEventObject },
    handler: async ({ auth, em, params }) => {
      const delivery = await findDelivery(em, auth.organizationId, params.id);
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
      'A delivered or failed delivery starts a new run of attempts with a fresh schedule; a pending one is attempted now instead of at next_retry_at.',
    tag,
    scope: 'webhooks:write',
    params: IdParams,
    response: { status: 202, description: 'Queued', schema: EventRetryObject },
    handler: async ({ auth, em, params, deps }) => {
      const delivery = await findDelivery(em, auth.organizationId, params.id);
      if (delivery.status !== 'pending') {
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
