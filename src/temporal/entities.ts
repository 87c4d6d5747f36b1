import { Entity, Index, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { prefixedId } from '../shared/ids';
import type { IdConflictPolicy, IdReusePolicy } from './flow';

/**
 * A workflow start recorded in the transaction of the change that needs it (a durable outbox row):
 * the starter fires it right after that transaction commits, and the start sweep fires any that
 * were not (process died, Temporal down). `started_at` says the start reached Temporal.
 */
@Entity({ tableName: 'workflow_starts' })
@Unique({ properties: ['workflowId'] })
@Index({ properties: ['startedAt', 'createdAt'] })
export class WorkflowStart {
  [OptionalProps]?: 'attempts' | 'restarts' | 'createdAt';

  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('wfs');

  @Property({ type: 'text' })
  workflowId!: string;

  @Property({ type: 'text' })
  workflowType!: string;

  @Property({ type: 'jsonb' })
  input!: unknown;

  /** Null for the service's own (organization-less) work. */
  @Property({ type: 'uuid', nullable: true })
  organizationId?: string | null;

  @Property({ type: 'text' })
  resourceType!: string;

  @Property({ type: 'text' })
  resourceId!: string;

  @Property({ type: 'text' })
  idReusePolicy!: IdReusePolicy;

  @Property({ type: 'text' })
  idConflictPolicy!: IdConflictPolicy;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  startedAt?: Date | null;

  /** Failed start attempts since the last success (each logged). */
  @Property({ type: 'integer' })
  attempts: number = 0;

  @Property({ type: 'text', nullable: true })
  lastError?: string | null;

  /** Times the reconciler found the resource pending with no running workflow and started it again. */
  @Property({ type: 'integer' })
  restarts: number = 0;
}
