import { Entity, Enum, Index, ManyToOne, type Opt, PrimaryKey, Property } from '@mikro-orm/core';
import { Member, Organization } from '../organizations/entities';
import { ENVIRONMENTS, type Environment } from '../shared/environments';
import { prefixedId } from '../shared/ids';

export { ENVIRONMENTS, type Environment };

@Entity({ tableName: 'api_keys' })
@Index({ properties: ['organization', 'createdAt', 'id'] })
export class ApiKey {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('key');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** The member this key acts for, if any (approvals and audit actors come from it). */
  @ManyToOne(() => Member, { nullable: true, deleteRule: 'set null' })
  member?: Member | null;

  @Property({ type: 'text' })
  name!: string;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text[]' })
  scopes!: string[];

  @Property({ type: 'text' })
  apiVersion!: string;

  /** SHA-256 of the secret, hex. The secret is high-entropy, so a fast hash is the right tool. */
  @Property({ type: 'text', unique: true })
  secretHash!: string;

  /** Last four characters, to tell keys apart in lists without exposing them. */
  @Property({ type: 'text' })
  secretLastFour!: string;

  /** The key that minted this one (null: the operator, through the CLI). Approvals trace it (docs/policies.md). */
  @Property({ type: 'text', nullable: true })
  createdByKeyId?: string | null;

  /** The member the minting key acted for, if any. */
  @Property({ type: 'uuid', nullable: true })
  createdByMemberId?: string | null;

  /**
   * Minted through the API to act for another member: it authenticates nothing (403
   * `api_key_pending_confirmation`) until a key acting for that member confirms it.
   */
  @Property({ type: 'boolean', default: false })
  pendingConfirmation: Opt<boolean> = false;

  /** When, and by which key of its member, a pending key was confirmed. */
  @Property({ type: 'timestamptz', nullable: true })
  confirmedAt?: Date | null;

  @Property({ type: 'text', nullable: true })
  confirmedByKeyId?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', nullable: true })
  lastUsedAt?: Date | null;

  @Property({ type: 'timestamptz', nullable: true })
  revokedAt?: Date | null;
}

/**
 * A key's request budget, shared by every API process (src/http/rate-limit.ts): the tokens left
 * when last touched, refilled continuously at RATE_LIMIT_PER_SECOND up to RATE_LIMIT_BURST.
 */
@Entity({ tableName: 'api_key_rate_buckets' })
export class ApiKeyRateBucket {
  @ManyToOne(() => ApiKey, { primary: true, deleteRule: 'cascade' })
  apiKey!: ApiKey;

  /** Fractional: refill accrues continuously. Not money. */
  @Property({ type: 'double' })
  tokens!: number;

  /** Whole tokens the last take handed to an API process (a batch under load; 0: refused). */
  @Property({ type: 'integer' })
  taken!: number;

  @Property({ type: 'timestamptz' })
  updatedAt!: Date;
}
