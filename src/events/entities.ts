import { Embeddable, Embedded, Entity, Enum, Index, ManyToOne, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import { Organization } from '../organizations/entities';
import { prefixedId } from '../shared/ids';

/**
 * The HMAC secrets of a destination. After a rotation the previous secret keeps signing (beside
 * the new one) until `previousExpiresAt`, so receivers can switch without dropping deliveries.
 * Each secret is stored sealed (envelope-encrypted, src/events/secrets.ts); never returned by the
 * API after create or rotate, never logged.
 */
@Embeddable()
export class SigningSecrets {
  @Property({ type: 'text' })
  current!: string;

  @Property({ type: 'text', nullable: true })
  previous?: string | null;

  @Property({ type: 'timestamptz', nullable: true })
  previousExpiresAt?: Date | null;
}

export const WEBHOOK_STATUSES = ['enabled', 'disabled'] as const;
export type WebhookStatus = (typeof WEBHOOK_STATUSES)[number];

@Entity({ tableName: 'webhook_endpoints' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
export class WebhookEndpoint {
  [OptionalProps]?: 'eventTypes' | 'status' | 'consecutiveFailures' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('wh');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** The creating key's environment: decides the URL policy (live: HTTPS to public addresses only). */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text' })
  url!: string;

  /** Empty: every event type. */
  @Property({ type: 'text[]' })
  eventTypes: string[] = [];

  @Enum({ items: () => WEBHOOK_STATUSES, nativeEnumName: 'webhook_status' })
  status: WebhookStatus = 'enabled';

  /** Why the service disabled it (410 Gone); null when enabled or disabled by the user. */
  @Property({ type: 'text', nullable: true })
  disabledReason?: string | null;

  /** Failed attempts since the last success, over all deliveries: at WEBHOOK_CIRCUIT_FAILURES the circuit opens. */
  @Property({ type: 'integer' })
  consecutiveFailures: number = 0;

  /** Workflow time of the first failure since the last success; WEBHOOK_DISABLE_AFTER_HOURS later, the endpoint is disabled. */
  @Property({ type: 'timestamptz', nullable: true })
  failingSince?: Date | null;

  /** While the circuit is open: the one delivery that keeps attempting on its schedule; the others wait for it. */
  @Property({ type: 'text', nullable: true })
  probeDeliveryId?: string | null;

  /** Payload version: the creating request's effective API version. */
  @Property({ type: 'text' })
  apiVersion!: string;

  /** Attempt ceiling per run of deliveries; null: only the 24 h window limits retries. */
  @Property({ type: 'integer', nullable: true })
  maxAttempts?: number | null;

  @Embedded(() => SigningSecrets, { prefix: 'secret_' })
  secrets!: SigningSecrets;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz' })
  updatedAt: Date = new Date();

  /** Deleted endpoints stay for their delivery history; they receive nothing more. */
  @Property({ type: 'timestamptz', nullable: true })
  deletedAt?: Date | null;
}

export const SUBSCRIPTION_STATUSES = ['active', 'disabled', 'failed'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/** An on-chain address watched for events, delivered to its own webhook_url. */
@Entity({ tableName: 'subscriptions' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['chain', 'address'] })
export class Subscription {
  [OptionalProps]?: 'eventType' | 'metadata' | 'status' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('sub');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  address!: string;

  @Property({ type: 'text' })
  chain!: string;

  @Property({ type: 'text' })
  network!: string;

  @Property({ type: 'text' })
  webhookUrl!: string;

  /** Empty: every on-chain event type. */
  @Property({ type: 'text' })
  eventType: string = '';

  @Property({ type: 'text', nullable: true })
  label?: string | null;

  @Property({ type: 'jsonb' })
  metadata: Record<string, unknown> = {};

  @Enum({ items: () => SUBSCRIPTION_STATUSES, nativeEnumName: 'subscription_status' })
  status: SubscriptionStatus = 'active';

  @Property({ type: 'text', nullable: true })
  failureReason?: string | null;

  @Property({ type: 'text' })
  apiVersion!: string;

  @Property({ type: 'integer', nullable: true })
  maxAttempts?: number | null;

  @Embedded(() => SigningSecrets, { prefix: 'secret_' })
  secrets!: SigningSecrets;

  @Property({ type: 'timestamptz', nullable: true })
  lastEventAt?: Date | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz' })
  updatedAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  deletedAt?: Date | null;
}

/** The outbox row: one emitted event, written in the transaction of the change it reports. */
@Entity({ tableName: 'events' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Unique({ properties: ['organization', 'dedupeKey'] })
export class Event {
  [OptionalProps]?: 'createdAt';

  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('evt');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** The environment of what the event is about: only that environment's endpoints and subscriptions receive it. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  type!: string;

  @Property({ type: 'jsonb' })
  data!: Record<string, unknown>;

  /** A caller-chosen key: emitting the same key twice yields one event (e.g. a retried activity). */
  @Property({ type: 'text', nullable: true })
  dedupeKey?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

export const DESTINATION_KINDS = ['webhook', 'subscription', 'card'] as const;
export type DestinationKind = (typeof DESTINATION_KINDS)[number];

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One event for one destination: the API's "delivery event" (object `event`). */
@Entity({ tableName: 'event_deliveries' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Unique({ properties: ['event', 'destinationKind', 'destinationId'] })
export class Delivery {
  [OptionalProps]?: 'status' | 'attempts' | 'run' | 'heldByCircuit' | 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('dlv');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** Copied from the event: a key sees only its environment's deliveries. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => Event, { deleteRule: 'cascade' })
  event!: Event;

  /** Copied from the event, for the `type` filter. */
  @Property({ type: 'text' })
  type!: string;

  @Enum({ items: () => DESTINATION_KINDS, nativeEnumName: 'destination_kind' })
  destinationKind!: DestinationKind;

  /** The webhook endpoint, subscription or card id (the API's `webhook_id`). */
  @Property({ type: 'text' })
  destinationId!: string;

  /** URL posted to, refreshed from the destination at each attempt. */
  @Property({ type: 'text' })
  destinationUrl!: string;

  @Enum({ items: () => DELIVERY_STATUSES, nativeEnumName: 'delivery_status' })
  status: DeliveryStatus = 'pending';

  /** Attempts over every run. */
  @Property({ type: 'integer' })
  attempts: number = 0;

  /** 1 for the first run of attempts; each manual retry starts the next run. */
  @Property({ type: 'integer' })
  run: number = 1;

  @Property({ type: 'integer', nullable: true })
  maxAttempts?: number | null;

  /**
   * Pending with no workflow: created while its endpoint's circuit was open, it waits for the
   * circuit to close (its start is recorded then) or for the endpoint's end (it fails then).
   */
  @Property({ type: 'boolean', default: false })
  heldByCircuit: boolean = false;

  @Property({ type: 'integer', nullable: true })
  lastHttpStatus?: number | null;

  @Property({ type: 'text', nullable: true })
  errorMessage?: string | null;

  @Property({ type: 'timestamptz', nullable: true })
  nextRetryAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  deliveredAt?: Date | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz' })
  updatedAt: Date = new Date();
}

/**
 * One HTTP attempt. Inserted before the POST: the unique (delivery, run, attempt) row is what
 * makes an attempt at-most-once when its activity is retried or its worker dies mid-request.
 */
@Entity({ tableName: 'event_delivery_attempts' })
@Unique({ properties: ['delivery', 'run', 'attempt'] })
export class DeliveryAttempt {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('dla');

  @ManyToOne(() => Delivery, { deleteRule: 'cascade' })
  delivery!: Delivery;

  @Property({ type: 'integer' })
  run!: number;

  @Property({ type: 'integer' })
  attempt!: number;

  /** Workflow time of the attempt (the schedule's clock). */
  @Property({ type: 'timestamptz' })
  attemptedAt!: Date;

  @Property({ type: 'integer', nullable: true })
  httpStatus?: number | null;

  @Property({ type: 'text', nullable: true })
  errorMessage?: string | null;

  @Property({ type: 'integer', nullable: true })
  durationMs?: number | null;

  /** Null while the request is in flight (or was cut off by a crash). */
  @Property({ type: 'timestamptz', nullable: true })
  completedAt?: Date | null;
}
