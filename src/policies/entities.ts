import { Check, Collection, Entity, type Opt, Enum, Index, ManyToOne, OneToMany, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { AddressBookEntry } from '../address-book/entities';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import { Member, Organization } from '../organizations/entities';
import { prefixedId } from '../shared/ids';
import { ACTION_TYPES, CATEGORY_VALUES, type ActionType, type Condition, type PolicyCategory } from './schema';

export const POLICY_STATUSES = ['draft', 'enforced', 'archived'] as const;
export type PolicyStatus = (typeof POLICY_STATUSES)[number];

@Entity({ tableName: 'policies' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Index({ properties: ['organization', 'environment', 'status'] })
export class Policy {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('pol');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** The creating key's environment: an enforced policy decides only that environment's requests. Its rules belong to it. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text', default: '' })
  description: string = '';

  @Enum({ items: () => CATEGORY_VALUES, nativeEnumName: 'policy_category' })
  category: PolicyCategory = 'access';

  @Enum({ items: () => POLICY_STATUSES, nativeEnumName: 'policy_status' })
  status: Opt<PolicyStatus> = 'draft';

  /** Lower numbers are evaluated first. */
  @Property({ type: 'integer', default: 100 })
  priority: number = 100;

  @Property({ type: 'text', nullable: true })
  templateId?: string | null;

  /** The enforced policy this draft was copied from; archived when this one is enforced. */
  @ManyToOne(() => Policy, { nullable: true, deleteRule: 'set null' })
  sourcePolicy?: Policy | null;

  @Property({ type: 'text' })
  createdBy!: string;

  @Property({ type: 'text' })
  createdByName!: string;

  @OneToMany(() => PolicyRule, (rule) => rule.policy, { orderBy: { order: 'asc' } })
  rules = new Collection<PolicyRule>(this);

  @Property({ type: 'timestamptz', nullable: true })
  activatedAt?: Date | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

@Entity({ tableName: 'policy_rules' })
@Index({ properties: ['policy', 'order'] })
export class PolicyRule {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('rule');

  @ManyToOne(() => Policy, { deleteRule: 'cascade' })
  policy!: Policy;

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text', default: '' })
  description: string = '';

  @Enum({ items: () => ACTION_TYPES, nativeEnumName: 'policy_action_type' })
  actionType!: ActionType;

  @Property({ type: 'jsonb' })
  actionConfig: Record<string, unknown> = {};

  @Property({ type: 'jsonb' })
  conditions: Condition[] = [];

  /** 1-based position in first-match-wins order, dense within the policy. */
  @Property({ type: 'integer', fieldName: 'position' })
  order!: number;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}

export const APPROVAL_REQUEST_STATUSES = ['pending', 'approved', 'rejected', 'expired'] as const;
export type ApprovalRequestStatus = (typeof APPROVAL_REQUEST_STATUSES)[number];

/** What an approval request approves, as `kind` names it in the API. */
export const APPROVAL_REQUEST_KINDS = ['policy_activation', 'address_book_entry', 'transaction', 'governance_change'] as const;
export type ApprovalRequestKind = (typeof APPROVAL_REQUEST_KINDS)[number];

/**
 * A change awaiting approvals, of exactly one subject: a policy's activation (workflow
 * `policy-activation-<id>`), an address-book entry's early use (workflow
 * `address-book-entry-approval-<id>`) or a loosening governance change (workflow
 * `governance-change-<id>`), all under the organization's activation quorum; or a send a
 * `require_approval` rule held (workflow `transaction-approval-<id>`), under that rule's
 * approvers and count, identified by the digest of the send as asked.
 */
@Entity({ tableName: 'policy_approval_requests' })
@Index({ properties: ['policy', 'status'] })
@Index({ properties: ['addressBookEntry', 'status'] })
@Index({ properties: ['organization', 'environment', 'transactionDigest', 'status'] })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Check({ name: 'policy_approval_requests_subject_check', expression: 'num_nonnulls(policy_id, address_book_entry_id, transaction_digest, governance_change_id) = 1' })
export class ApprovalRequest {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('apr');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** The environment of the policy, entry or send. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @ManyToOne(() => Policy, { deleteRule: 'cascade', nullable: true })
  policy?: Policy | null;

  /** Deleting the entry removes its requests; their workflows find nothing left to decide. */
  @ManyToOne(() => AddressBookEntry, { deleteRule: 'cascade', nullable: true })
  addressBookEntry?: AddressBookEntry | null;

  /** A loosening change of a control (docs/policies.md, "Governance"), applied once approved. */
  @ManyToOne(() => GovernanceChange, { deleteRule: 'cascade', nullable: true })
  governanceChange?: GovernanceChange | null;

  /** A held send: sha256 of its request fields and Idempotency-Key (movements/held-sends.ts); the same send asked again matches it. */
  @Property({ type: 'text', nullable: true })
  transactionDigest?: string | null;

  /** A held send: the request as asked, what the approvers judge. */
  @Property({ type: 'jsonb', nullable: true })
  transactionRequest?: Record<string, unknown> | null;

  /** A held send: the enforced policy and the require_approval rule that held it. */
  @Property({ type: 'text', nullable: true })
  heldByPolicyId?: string | null;

  @Property({ type: 'text', nullable: true })
  heldByRuleId?: string | null;

  /** A held send: the members the rule's approvers stood for when it was held (the M of its N-of-M); only they may vote. */
  @Property({ type: 'jsonb', nullable: true })
  approverMemberIds?: string[] | null;

  /** A held send, approved: when the send it admitted passed the gate (once), and that send's id. */
  @Property({ type: 'timestamptz', nullable: true })
  consumedAt?: Date | null;

  @Property({ type: 'text', nullable: true })
  consumedByTransactionId?: string | null;

  /** The requesting member, or the API key id when the key acts for no member. */
  @Property({ type: 'text' })
  requestedBy!: string;

  /** The API key that asked for the activation: no key it minted (directly or through others) may vote. */
  @Property({ type: 'text', nullable: true })
  requestedByKeyId?: string | null;

  @Property({ type: 'text' })
  requestedByName!: string;

  @Property({ type: 'text', default: '' })
  comment: Opt<string> = '';

  @Property({ type: 'integer' })
  requiredApprovals!: number;

  @Enum({ items: () => APPROVAL_REQUEST_STATUSES, nativeEnumName: 'approval_request_status' })
  status: Opt<ApprovalRequestStatus> = 'pending';

  @Property({ type: 'timestamptz' })
  expiresAt!: Date;

  @Property({ type: 'timestamptz', nullable: true })
  decidedAt?: Date | null;

  @OneToMany(() => ApprovalVote, (vote) => vote.approvalRequest, { orderBy: { createdAt: 'asc' } })
  votes = new Collection<ApprovalVote>(this);

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

export const VOTE_DECISIONS = ['approve', 'reject'] as const;
export type VoteDecision = (typeof VOTE_DECISIONS)[number];

/** One member's vote; the unique key makes a repeated vote (or activity retry) a no-op. */
@Entity({ tableName: 'policy_approval_votes' })
@Unique({ properties: ['approvalRequest', 'member'] })
export class ApprovalVote {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('vote');

  @ManyToOne(() => ApprovalRequest, { deleteRule: 'cascade' })
  approvalRequest!: ApprovalRequest;

  @ManyToOne(() => Member, { deleteRule: 'cascade' })
  member!: Member;

  @Enum({ items: () => VOTE_DECISIONS, nativeEnumName: 'approval_vote_decision' })
  decision!: VoteDecision;

  @Property({ type: 'text', default: '' })
  comment: string = '';

  /** The key the vote was cast with (null: cast before keys were recorded): later votes are checked against its lineage. */
  @Property({ type: 'text', nullable: true })
  apiKeyId?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

/** Every step of a policy's life and every transaction decision, with the actor. */
@Entity({ tableName: 'policy_audit_logs' })
@Index({ properties: ['policyId', 'createdAt', 'id'] })
@Index({ properties: ['organization', 'environment', 'action', 'createdAt'] })
export class PolicyAuditLog {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('pal');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** The environment of the policy or of the decided request. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  /** Not a foreign key: a decision that matched no policy is logged too. */
  @Property({ type: 'text', nullable: true })
  policyId?: string | null;

  @Property({ type: 'text' })
  action!: string;

  @Property({ type: 'text' })
  actorId!: string;

  @Property({ type: 'text' })
  actorName!: string;

  @Property({ type: 'jsonb' })
  changes: Record<string, unknown> = {};

  @Property({ type: 'jsonb' })
  metadata: Record<string, unknown> = {};

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

export const GOVERNANCE_CHANGE_STATUSES = ['pending', 'applied', 'rejected', 'expired'] as const;
export type GovernanceChangeStatus = (typeof GOVERNANCE_CHANGE_STATUSES)[number];

/**
 * What a governance change does, as the governance log names it. Loosening kinds wait for the
 * organization's quorum (a change request); tightening kinds apply at once (docs/policies.md).
 */
export const GOVERNANCE_CHANGE_KINDS = [
  'policy_activated',
  'policy_archived',
  'gas_station_limits_raised',
  'gas_station_limits_lowered',
  'approvals_lowered',
  'approvals_raised',
  'cooling_shortened',
  'cooling_lengthened',
  'approver_added',
  'api_key_revoked',
] as const;
export type GovernanceChangeKind = (typeof GOVERNANCE_CHANGE_KINDS)[number];

/** Who asked for a governance change: a member, a key acting for no member, or the operator's CLI. */
export const GOVERNANCE_ACTOR_TYPES = ['user', 'apikey', 'operator'] as const;
export type GovernanceActorType = (typeof GOVERNANCE_ACTOR_TYPES)[number];

/**
 * One change to the controls, in the governance log (`GET /v1/governance/log`): written in the
 * transaction that applies it, or that opens its change request; a pending row moves once, to
 * applied, rejected or expired, when its request is decided. Its approvals are the votes of
 * `approvalRequestId`.
 */
@Entity({ tableName: 'governance_changes' })
@Index({ properties: ['organization', 'createdAt', 'id'] })
@Index({ properties: ['approvalRequestId'] })
export class GovernanceChange {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('gov');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  /** The subject's environment (a policy's, a station's); null for organization-wide settings and members. */
  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment', nullable: true })
  environment?: Environment | null;

  @Enum({ items: () => GOVERNANCE_CHANGE_KINDS, nativeEnumName: 'governance_change_kind' })
  kind!: GovernanceChangeKind;

  /** The ids of what changed, by name (policy_id, gas_station_id, member_id...). */
  @Property({ type: 'jsonb' })
  subject: Record<string, string> = {};

  /** What changes: each field as {from, to}, or the member to add; what the approved change applies. */
  @Property({ type: 'jsonb' })
  change: Record<string, unknown> = {};

  @Enum({ items: () => GOVERNANCE_ACTOR_TYPES, nativeEnumName: 'governance_actor_type' })
  requestedByType!: GovernanceActorType;

  /** The member, the key (acting for no member) or `operator`. */
  @Property({ type: 'text' })
  requestedById!: string;

  @Property({ type: 'text' })
  requestedByName!: string;

  /** The key that asked, when a key did: a member this change adds counts as added by it. */
  @Property({ type: 'text', nullable: true })
  requestedByKeyId?: string | null;

  /** The approval request that decides (or decided) it; not a foreign key, as the request points here. */
  @Property({ type: 'text', nullable: true })
  approvalRequestId?: string | null;

  @Enum({ items: () => GOVERNANCE_CHANGE_STATUSES, nativeEnumName: 'governance_change_status' })
  status!: GovernanceChangeStatus;

  @Property({ type: 'timestamptz', nullable: true })
  appliedAt?: Date | null;

  /** When it was asked for. */
  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}
