import { Entity, Enum, Index, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import { prefixedId } from '../shared/ids';

export type IdempotencyStatus = 'in_flight' | 'completed';

/**
 * How `responseBody` is stored: `sealed_v1` envelope-encrypted under the KeyProvider (every
 * response written now); `clear` only for rows written before responses were sealed, until
 * `cli migrate` seals them.
 */
export type IdempotencyResponseFormat = 'sealed_v1' | 'clear';

/**
 * One Idempotency-Key of one organization and environment (the calling key's), with the stored
 * response once the request finished: the same key sent by a sandbox key and a live key are two records.
 */
@Entity({ tableName: 'idempotency_records' })
@Unique({ properties: ['organizationId', 'environment', 'key'] })
@Index({ properties: ['createdAt'] })
export class IdempotencyRecord {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('idem');

  @Property({ type: 'uuid' })
  organizationId!: string;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

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

  /** The response as sent, byte for byte (text, not jsonb, which would reorder keys), sealed: see responseFormat. */
  @Property({ type: 'text', nullable: true })
  responseBody?: string | null;

  @Property({ type: 'text', nullable: true })
  responseFormat?: IdempotencyResponseFormat | null;

  @Property({ type: 'text', nullable: true })
  responseContentType?: string | null;

  @Property({ type: 'timestamptz' })
  lockedAt: Date = new Date();

  /** Fencing token, new on every claim and take-over: only the handler holding it may complete or release. */
  @Property({ type: 'uuid', nullable: true })
  claimToken?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}
