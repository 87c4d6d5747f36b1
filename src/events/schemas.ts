import { chainAddressBody } from '../chains/schemas';
import { ListQuery } from '../shared/pagination';
import { text, Timestamp, trimmedText, z } from '../shared/schemas';
import { DELIVERY_STATUSES, DESTINATION_KINDS, SUBSCRIPTION_STATUSES, WEBHOOK_STATUSES } from './entities';
import { EVENT_TYPES, isEventType, ON_CHAIN_EVENT_TYPES } from './event-types';

export const IdParams = z.object({ id: text(1, 64) });

// The enum is the document's: the refinement keeps its message pointing at the list.
const EventTypeName = z
  .string()
  .refine(isEventType, 'must be one of GET /v1/webhooks/event-types')
  .openapi({ enum: EVENT_TYPES.map((entry) => entry.type) });
const MaxAttempts = z.number().int().min(1).max(50);
const Url = trimmedText(1, 2048);

export const EventTypeObject = z
  .object({ object: z.literal('event_type'), type: z.string(), description: z.string() })
  .openapi('EventType');
export const EventTypeList = z.object({ object: z.literal('list'), data: z.array(EventTypeObject), has_more: z.literal(false), next_cursor: z.null() });

export const WebhookObject = z
  .object({
    id: z.string(),
    object: z.literal('webhook'),
    name: z.string(),
    url: z.string(),
    event_types: z.array(z.string()).openapi({ description: 'Empty: every event type' }),
    status: z.enum(WEBHOOK_STATUSES),
    disabled_reason: z.string().optional().openapi({ description: 'Set when the service disabled the endpoint (410 Gone)' }),
    api_version: z.string().openapi({ description: 'Version of the payloads sent to this endpoint' }),
    max_attempts: z.number().int().optional().openapi({ description: 'Attempt ceiling per run; absent: the 24 h window only' }),
    has_signing_secret: z.boolean(),
    signing_secret: z.string().optional().openapi({ description: 'Plaintext `whsec_` secret; only in the create response' }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('Webhook');

export const CreateWebhookBody = z
  .object({
    name: trimmedText(1, 255),
    url: Url,
    event_types: z.array(EventTypeName).max(100).default([]),
    max_attempts: MaxAttempts.optional(),
  })
  .strict()
  .openapi('CreateWebhookRequest');

export const UpdateWebhookBody = z
  .object({
    name: trimmedText(1, 255).optional(),
    url: Url.optional(),
    event_types: z.array(EventTypeName).max(100).optional(),
    status: z.enum(WEBHOOK_STATUSES).optional().openapi({ description: 'disabled stops deliveries; enabled resumes them' }),
    max_attempts: MaxAttempts.nullable().optional(),
  })
  .strict()
  .openapi('UpdateWebhookRequest');

export const SigningSecretObject = z
  .object({
    object: z.literal('signing_secret'),
    signing_secret: z.string().openapi({ description: 'The new plaintext secret, shown only in this response' }),
    previous_secret_expires_at: Timestamp.nullable().openapi({ description: 'Until then deliveries are signed with the old secret too' }),
  })
  .openapi('SigningSecret');

export const SubscriptionObject = z
  .object({
    id: z.string(),
    object: z.literal('subscription'),
    address: z.string(),
    chain: z.string(),
    network: z.string(),
    webhook_url: z.string(),
    event_type: z.string().openapi({ description: 'Empty: every on-chain event type' }),
    label: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()),
    status: z.enum(SUBSCRIPTION_STATUSES),
    failure_reason: z.string().optional().openapi({ description: 'Only when status is failed' }),
    has_signing_secret: z.boolean(),
    signing_secret: z.string().optional().openapi({ description: 'Plaintext secret; only on create and rotate-secret' }),
    max_attempts: z.number().int().optional(),
    last_event_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('Subscription');

const OnChainEventType = z.enum(['', ...ON_CHAIN_EVENT_TYPES]);

export const CreateSubscriptionBody = chainAddressBody({
  webhook_url: Url,
  event_type: OnChainEventType.default(''),
  label: text(0, 255).optional(),
  metadata: z.record(z.string(), z.unknown()).default({}),
  max_attempts: MaxAttempts.optional(),
  network: z.string().optional().openapi({ deprecated: true, description: 'Ignored: the key environment decides the network' }),
}).openapi('CreateSubscriptionRequest');

export const UpdateSubscriptionBody = z
  .object({
    webhook_url: Url.optional(),
    event_type: OnChainEventType.optional(),
    label: text(0, 255).nullable().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    status: z.enum(['active', 'disabled']).optional().openapi({ description: 'active also re-enables a failed subscription' }),
    max_attempts: MaxAttempts.nullable().optional(),
  })
  .strict()
  .openapi('UpdateSubscriptionRequest');

export const DeliveryAttemptObject = z
  .object({
    run: z.number().int(),
    attempt: z.number().int(),
    attempted_at: Timestamp,
    http_status_code: z.number().int().optional(),
    error_message: z.string().optional(),
    duration_ms: z.number().int().optional(),
  })
  .openapi('DeliveryAttempt');

export const DeliveryEventObject = z
  .object({
    id: z.string(),
    object: z.literal('event'),
    event_id: z.string().openapi({ description: 'The emitted event (payload event_id and webhook-id header)' }),
    webhook_id: z.string().openapi({ description: 'Webhook endpoint, subscription or card the delivery belongs to' }),
    destination_type: z.enum(DESTINATION_KINDS),
    type: z.string(),
    destination: z.string().openapi({ description: 'URL posted to' }),
    delivery_status: z.enum(DELIVERY_STATUSES),
    delivery_attempts: z.number().int(),
    max_attempts: z.number().int().optional(),
    http_status_code: z.number().int().optional(),
    error_message: z.string().optional(),
    next_retry_at: Timestamp.optional(),
    delivered_at: Timestamp.optional(),
    created_at: Timestamp,
    updated_at: Timestamp,
    attempts: z.array(DeliveryAttemptObject).optional().openapi({ description: 'Every attempt, oldest first (retrieve only)' }),
  })
  .openapi('DeliveryEvent');

export const WebhookEventObject = z
  .object({
    id: z.string().openapi({ description: 'evt_...: the payload\'s event_id and the webhook-id header every destination received' }),
    object: z.literal('webhook_event'),
    type: z.string(),
    created_at: Timestamp,
    data: z.record(z.string(), z.unknown()).openapi({ description: 'The payload\'s data, as every destination received it' }),
    deliveries: z.array(DeliveryEventObject.omit({ attempts: true })).openapi({ description: 'One per destination the event went to, oldest first (empty when none matched); attempts: GET /v1/events/{delivery id}' }),
  })
  .openapi('WebhookEvent');

export const EventListQuery = ListQuery.extend({
  webhook_id: text(1, 64).optional(),
  event_id: text(1, 64).optional().openapi({ description: 'The emitted event (evt_...): its deliveries, one per destination' }),
  delivery_status: z.enum(DELIVERY_STATUSES).optional(),
  type: text(1, 100).optional(),
});

export const DeletedObject = z.object({ id: z.string(), object: z.string(), deleted: z.literal(true) }).openapi('Deleted');

export const EventRetryObject = z.object({ object: z.literal('event_retry'), status: z.literal('queued') }).openapi('EventRetry');
