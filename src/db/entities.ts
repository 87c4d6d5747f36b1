import { ApiKey } from '../api-keys/entities';
import { Delivery, DeliveryAttempt, Event, SigningSecrets, Subscription, WebhookEndpoint } from '../events/entities';
import { IdempotencyRecord } from '../idempotency/entities';
import { Member, Organization, Role } from '../organizations/entities';

/** Every entity of every domain; a new domain adds its entities here. */
export const entities = [
  Organization,
  Member,
  Role,
  ApiKey,
  IdempotencyRecord,
  SigningSecrets,
  WebhookEndpoint,
  Subscription,
  Event,
  Delivery,
  DeliveryAttempt,
];
