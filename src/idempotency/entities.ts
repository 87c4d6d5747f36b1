import { Entity, Enum, Index, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { prefixedId } from '../shared/ids';

export type IdempotencyStatus = 'in_flight' | 'completed';

/** One Idempotency-Key of one organization, with the stored response once the request finished. */
@Entity({ tableName: 'idempotency_records' })
@Unique({ properties: ['organizationId', 'key'] })
@Index({ properties: ['createdAt'] })
export class IdempotencyRecord {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('idem');

  @Property({ type: 'uuid' })
  organizationId!: string;

  @Property({ type: 'text' })
  key!: string;

  /** SHA-256 over method, path and the canonical body: a different request under the same key is refused. */
  @Property({ type: 'text' })
  requestHash!: string;

  @Property({ type: 'text' })
  method!: string;

  @Property({ type: 'text' })
  path!: string;

  @Enum({ items: ['in_flight', 'completed'], nativeEnumName: 'idempotency_status' })
  status!: IdempotencyStatus;

  @Property({ type: 'integer', nullable: true })
  responseStatus?: number | null;

  @Property({ type: 'jsonb', nullable: true })
  responseBody?: unknown;

  @Property({ type: 'timestamptz' })
  lockedAt: Date = new Date();

  /** Fencing token, new on every claim and take-over: only the handler holding it may complete or release. */
  @Property({ type: 'uuid', nullable: true })
  claimToken?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}
