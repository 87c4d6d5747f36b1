import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { assertAddressBookEntries } from '../address-book/service';
import { emit } from '../events/service';
import { ApiKey, type Environment } from '../api-keys/entities';
import type { Config } from '../config';
import { readOneByColumns } from '../db/lean';
import { errors } from '../shared/errors';
import { assertBelowLimit } from '../shared/limits';
import { Member, Organization, Role } from '../organizations/entities';
import { z } from '../shared/schemas';
import { ApprovalRequest, Policy, PolicyAuditLog, PolicyRule } from './entities';
import { isAddressBookOperator, type ActionType, type Condition, type PolicyCategory } from './schema';
import { checkActionConfig } from './schemas';
import { canonicalConditions } from './addresses';
import { APPROVER_ROLE_PLACEHOLDER, findTemplate, type PolicyTemplate } from './templates';
import { validatePolicyRules, type DraftRule, type ValidationResult } from './validator';

/** One organization's policies in one environment: what every lookup is limited to. */
export interface PolicyScope {
  organizationId: string;
  environment: Environment;
}

/**
 * Who acts, and in which environment: a member, the API key itself when it acts for no member, or
 * the system (expiry). `apiKeyId` is the key that carried the call, when there was one.
 */
export interface PolicyActor extends PolicyScope {
  id: string;
  name: string;
  type: 'user' | 'apikey' | 'system';
  apiKeyId?: string | null;
}

/** The caps on an environment's policies and on one policy's rules (docs/limits.md). */
export type PolicyLimits = Pick<Config, 'MAX_POLICIES' | 'MAX_POLICY_RULES'>;

/** The caller as authenticated: its organization and environment, its key and the member it acts for, if any. */
export interface Caller extends PolicyScope {
  apiKeyId: string;
  memberId: string | null;
}

/** The caller's member (or its key when it acts for none), read detached: the movement gate resolves one per movement. */
export async function resolveActor(em: EntityManager, auth: Caller): Promise<PolicyActor> {
  const scope = { organizationId: auth.organizationId, environment: auth.environment, apiKeyId: auth.apiKeyId };
  if (auth.memberId) {
    const member = await readOneByColumns(em, Member, { id: auth.memberId });
    if (!member) throw new Error(`member ${auth.memberId} of key ${auth.apiKeyId} not found`);
    return { ...scope, id: member.id, name: member.name, type: 'user' };
  }
  const key = await readOneByColumns(em, ApiKey, { id: auth.apiKeyId }, ['secretHash']);
  if (!key) throw new Error(`key ${auth.apiKeyId} not found`);
  return { ...scope, id: key.id, name: key.name, type: 'apikey' };
}

/** The service itself (an expiry); its entries belong to `environment` (sandbox when no environment is concerned). */
export const systemActor = (organizationId: string, environment: Environment = 'sandbox'): PolicyActor => ({ organizationId, environment, id: 'system', name: 'System', type: 'system' });

export function writeAudit(
  em: EntityManager,
  entry: { actor: PolicyActor; policyId: string | null; action: string; changes?: Record<string, unknown>; metadata?: Record<string, unknown> },
): PolicyAuditLog {
  return em.create(PolicyAuditLog, {
    organization: em.getReference(Organization, entry.actor.organizationId),
    environment: entry.actor.environment,
    policyId: entry.policyId,
    action: entry.action,
    actorId: entry.actor.id,
    actorName: entry.actor.name,
    changes: entry.changes ?? {},
    metadata: { actor_type: entry.actor.type, ...entry.metadata },
    createdAt: new Date(),
  });
}

export type PolicyEventType =
  | 'policy.alert'
  | 'policy.activation_requested'
  | 'policy.activated'
  | 'policy.activation_rejected'
  | 'policy.activation_expired'
  | 'policy.change_requested'
  | 'policy.archived'
  | 'policy.changed';

/**
 * The one place every policy event leaves through, inside the caller's transaction: the audit
 * entry (action = the type without `policy.`) and the event for webhooks (transactional outbox).
 */
export async function recordPolicyEvent(
  em: EntityManager,
  event: { organizationId: string; type: PolicyEventType; data: Record<string, unknown> & { policy_id: string | null }; actor: PolicyActor },
): Promise<void> {
  writeAudit(em, { actor: event.actor, policyId: event.data.policy_id, action: event.type.replace(/^policy\./, ''), metadata: { event: event.type, ...event.data } });
  await emit(em, { organizationId: event.organizationId, environment: event.actor.environment, type: event.type, data: event.data });
}

// ---------- policies and rules ----------

export async function findPolicy(em: EntityManager, scope: PolicyScope, id: string): Promise<Policy> {
  const policy = await em.findOne(Policy, { id, organization: scope.organizationId, environment: scope.environment }, { populate: ['rules', 'sourcePolicy'] });
  if (!policy) throw errors.notFound('policy', id);
  return policy;
}

export async function pendingApprovalRequest(em: EntityManager, policy: Policy): Promise<ApprovalRequest | null> {
  return em.findOne(ApprovalRequest, { policy, status: 'pending' });
}

/** Only a draft with no pending activation can change; an enforced policy is copied instead. */
export async function assertEditable(em: EntityManager, policy: Policy): Promise<void> {
  if (policy.status === 'enforced') {
    throw errors.conflict('policy_enforced', 'An enforced policy cannot be edited. Copy it into a draft (POST /v1/policies with source_policy_id), edit and activate that.', {
      policy_id: policy.id,
    });
  }
  if (policy.status === 'archived') throw errors.conflict('policy_archived', 'An archived policy cannot be edited.', { policy_id: policy.id });
  const pending = await pendingApprovalRequest(em, policy);
  if (pending) {
    throw errors.conflict('activation_pending', 'The policy awaits activation approvals; it cannot change until they are decided.', {
      approval_request_id: pending.id,
    });
  }
}

export interface RuleInput {
  name: string;
  description?: string;
  action_type: ActionType;
  action_config?: Record<string, unknown>;
  conditions?: Condition[];
  order?: number;
}

/** Inserts at `order` (clamped to the end), shifting later rules so positions stay 1..n. */
export function addRule(em: EntityManager, policy: Policy, input: RuleInput): PolicyRule {
  const rules = policy.rules.getItems();
  const position = Math.min(input.order ?? rules.length + 1, rules.length + 1);
  for (const rule of rules) if (rule.order >= position) rule.order += 1;
  const rule = em.create(PolicyRule, {
    policy,
    name: input.name,
    description: input.description ?? '',
    actionType: input.action_type,
    actionConfig: input.action_config ?? {},
    conditions: input.conditions ?? [],
    order: position,
    createdAt: new Date(),
    updatedAt: new Date(),
  });
  policy.rules.add(rule);
  return rule;
}

/** Moves a rule to `order` (clamped), keeping positions dense. */
export function moveRule(policy: Policy, rule: PolicyRule, order: number): void {
  const others = policy.rules.getItems().filter((r) => r !== rule).sort((a, b) => a.order - b.order);
  others.splice(Math.min(order, others.length + 1) - 1, 0, rule);
  others.forEach((r, index) => (r.order = index + 1));
}

export function removeRule(em: EntityManager, policy: Policy, rule: PolicyRule): void {
  policy.rules.remove(rule);
  em.remove(rule);
  policy.rules.getItems().sort((a, b) => a.order - b.order).forEach((r, index) => (r.order = index + 1));
}

export async function updatePolicy(
  em: EntityManager,
  actor: PolicyActor,
  policyId: string,
  input: { name?: string; description?: string; category?: PolicyCategory; priority?: number },
): Promise<Policy> {
  const policy = await findPolicy(em, actor, policyId);
  await assertEditable(em, policy);
  const changes: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(input) as [keyof typeof input, never][]) {
    if (value === undefined || policy[field] === value) continue;
    changes[field] = [policy[field], value];
    policy[field] = value;
  }
  writeAudit(em, { actor, policyId: policy.id, action: 'updated', changes });
  await em.flush();
  return policy;
}

/** Archives a policy (an enforced one stops being enforced: a change request decides when, policies/change-requests.ts); archiving twice changes nothing. */
export async function archivePolicy(em: EntityManager, actor: PolicyActor, policyId: string): Promise<Policy> {
  const policy = await findPolicy(em, actor, policyId);
  if (policy.status === 'draft') await assertEditable(em, policy);
  if (policy.status !== 'archived') {
    writeAudit(em, { actor, policyId: policy.id, action: 'archived', changes: { status: [policy.status, 'archived'] } });
    policy.status = 'archived';
    await em.flush();
  }
  return policy;
}

export async function createRule(em: EntityManager, limits: PolicyLimits, actor: PolicyActor, policyId: string, input: RuleInput): Promise<{ policy: Policy; rule: PolicyRule }> {
  const policy = await findPolicy(em, actor, policyId);
  await assertEditable(em, policy);
  await checkAddressBookReferences(em, actor, input.conditions, '');
  await assertBelowLimit(em, {
    resource: 'policy_rules',
    owner: policy.id,
    holder: 'policy',
    limit: limits.MAX_POLICY_RULES,
    setting: 'MAX_POLICY_RULES',
    remedy: 'delete one',
    count: (tx) => tx.count(PolicyRule, { policy: policy.id }),
  });
  const rule = addRule(em, policy, withCanonicalAddresses(input, policy.environment, 'conditions'));
  writeAudit(em, { actor, policyId: policy.id, action: 'rule_added', changes: { rule_id: rule.id, name: rule.name, order: rule.order } });
  await em.flush();
  return { policy, rule };
}

async function findEditableRule(em: EntityManager, scope: PolicyScope, policyId: string, ruleId: string): Promise<{ policy: Policy; rule: PolicyRule }> {
  const policy = await findPolicy(em, scope, policyId);
  const rule = policy.rules.getItems().find((r) => r.id === ruleId);
  if (!rule) throw errors.notFound('rule', ruleId, 'ruleId');
  await assertEditable(em, policy);
  return { policy, rule };
}

export async function updateRule(
  em: EntityManager,
  actor: PolicyActor,
  policyId: string,
  ruleId: string,
  input: Partial<Omit<RuleInput, 'action_config'>> & { action_config?: Record<string, unknown> },
): Promise<{ policy: Policy; rule: PolicyRule }> {
  const { policy, rule } = await findEditableRule(em, actor, policyId, ruleId);
  await checkAddressBookReferences(em, actor, input.conditions, '');
  const actionType = input.action_type ?? rule.actionType;
  if (input.action_type || input.action_config) {
    // A new action type needs a config of its own shape: the old config is only kept when it fits.
    const config = input.action_config ?? rule.actionConfig;
    const check = z.unknown().superRefine((value, ctx) => checkActionConfig(actionType, value, ctx)).safeParse(config);
    if (!check.success) throw errors.validation(`action_config does not fit action_type ${actionType}: ${check.error.issues[0]!.message}`, 'action_config');
    rule.actionType = actionType;
    rule.actionConfig = config;
  }
  if (input.name !== undefined) rule.name = input.name;
  if (input.description !== undefined) rule.description = input.description;
  if (input.conditions !== undefined) rule.conditions = canonicalConditions(input.conditions, policy.environment, { strict: true, param: 'conditions' });
  if (input.order !== undefined) moveRule(policy, rule, input.order);
  writeAudit(em, { actor, policyId: policy.id, action: 'rule_updated', changes: { rule_id: rule.id, ...input } });
  await em.flush();
  return { policy, rule };
}

/** Deletes a rule of a draft; later rules move up. Returns the policy with its remaining rules. */
export async function deleteRule(em: EntityManager, actor: PolicyActor, policyId: string, ruleId: string): Promise<Policy> {
  const { policy, rule } = await findEditableRule(em, actor, policyId, ruleId);
  removeRule(em, policy, rule);
  writeAudit(em, { actor, policyId: policy.id, action: 'rule_deleted', changes: { rule_id: rule.id, name: rule.name } });
  await em.flush();
  return policy;
}

export async function createPolicy(
  em: EntityManager,
  limits: PolicyLimits,
  actor: PolicyActor,
  input: { name?: string; description?: string; category?: PolicyCategory; priority?: number; rules?: RuleInput[]; template_id?: string; source_policy_id?: string },
): Promise<Policy> {
  if (input.template_id && input.source_policy_id) throw errors.validation('Give template_id or source_policy_id, not both.', 'source_policy_id');
  const template = input.template_id ? findTemplate(input.template_id) : undefined;
  if (input.template_id && !template) throw errors.notFound('policy_template', input.template_id, 'template_id');
  const source = input.source_policy_id ? await findPolicy(em, actor, input.source_policy_id).catch(() => {
    throw errors.notFound('policy', input.source_policy_id!, 'source_policy_id');
  }) : undefined;
  const name = input.name ?? template?.name ?? source?.name;
  if (!name) throw errors.validation('name is required.', 'name');
  for (const [index, rule] of (input.rules ?? []).entries()) await checkAddressBookReferences(em, actor, rule.conditions, `rules.${index}.`);
  const copiedCount = template?.rules.length ?? source?.rules.length ?? 0;
  if (copiedCount + (input.rules?.length ?? 0) > limits.MAX_POLICY_RULES) {
    throw errors.validation(`The policy would hold ${copiedCount + (input.rules?.length ?? 0)} rules; a policy holds at most ${limits.MAX_POLICY_RULES} (MAX_POLICY_RULES).`, 'rules', {
      limit: limits.MAX_POLICY_RULES,
    });
  }
  await assertBelowLimit(em, {
    resource: 'policies',
    owner: `${actor.organizationId}:${actor.environment}`,
    holder: 'environment',
    limit: limits.MAX_POLICIES,
    setting: 'MAX_POLICIES',
    remedy: 'archive one (DELETE)',
    count: (tx) => tx.count(Policy, { organization: actor.organizationId, environment: actor.environment, status: { $ne: 'archived' } }),
  });

  const policy = em.create(Policy, {
    organization: em.getReference(Organization, actor.organizationId),
    environment: actor.environment,
    name,
    description: input.description ?? template?.description ?? source?.description ?? '',
    category: input.category ?? template?.category ?? source?.category ?? 'access',
    priority: input.priority ?? source?.priority ?? 100,
    templateId: template?.id ?? null,
    sourcePolicy: source ?? null,
    createdBy: actor.id,
    createdByName: actor.name,
    createdAt: new Date(),
    updatedAt: new Date(),
  });
  const copied: RuleInput[] = template
    ? await resolveTemplateRules(em, actor.organizationId, template)
    : (source?.rules.getItems().sort((a, b) => a.order - b.order).map((rule) => ({
        name: rule.name,
        description: rule.description,
        action_type: rule.actionType,
        action_config: structuredClone(rule.actionConfig),
        conditions: structuredClone(rule.conditions),
      })) ?? []);
  // Copies keep what their source held (canonical since written); the request's own rules must name addresses their chain reads.
  const rules = [
    ...copied.map((rule) => ({ ...rule, conditions: canonicalConditions(rule.conditions ?? [], actor.environment, { strict: false, param: 'conditions' }) })),
    ...(input.rules ?? []).map((rule, index) => withCanonicalAddresses(rule, actor.environment, `rules.${index}.conditions`)),
  ];
  for (const rule of rules) addRule(em, policy, rule);
  writeAudit(em, {
    actor,
    policyId: policy.id,
    action: 'created',
    changes: { name, category: policy.category, priority: policy.priority, rule_count: policy.rules.length },
    metadata: { template_id: template?.id ?? null, source_policy_id: source?.id ?? null },
  });
  return policy;
}

async function resolveTemplateRules(em: EntityManager, organizationId: string, template: PolicyTemplate): Promise<RuleInput[]> {
  const approverRole = await em.findOne(Role, { organization: organizationId, name: 'approver', builtIn: true });
  return template.rules.map((rule) => {
    const config = structuredClone(rule.action_config) as { approvers?: { id: string; type: string }[] };
    config.approvers?.forEach((approver) => {
      if (approver.id === APPROVER_ROLE_PLACEHOLDER && approverRole) approver.id = approverRole.id;
    });
    return { ...rule, action_config: config as Record<string, unknown>, conditions: structuredClone(rule.conditions) };
  });
}

/** Address-book conditions name entries of the caller's environment: any other id is 404 on `<prefix>conditions.<i>.values`. */
async function checkAddressBookReferences(em: EntityManager, scope: PolicyScope, conditions: readonly Condition[] | undefined, prefix: string): Promise<void> {
  for (const [index, condition] of (conditions ?? []).entries()) {
    if (!isAddressBookOperator(condition.operator) || !condition.values?.length) continue;
    await assertAddressBookEntries(em, scope, condition.values.map(String), `${prefix}conditions.${index}.values`);
  }
}

/** A rule input with its address operands canonical (strict: one its chain does not read is 400 on `param`). */
const withCanonicalAddresses = <T extends { conditions?: Condition[] }>(input: T, environment: Environment, param: string): T =>
  input.conditions === undefined ? input : { ...input, conditions: canonicalConditions(input.conditions, environment, { strict: true, param }) };

// ---------- approvers and validation ----------

/** The members and roles a rule may name as approvers; `callerVoters`: the members who may vote on the caller's activation requests. */
export async function approverCandidates(em: EntityManager, organizationId: string, callerVoters: ReadonlySet<string>) {
  const members = await em.find(Member, { organization: organizationId }, { orderBy: { name: 'asc', id: 'asc' } });
  const roles = await em.find(Role, { organization: organizationId }, { populate: ['members'], orderBy: { name: 'asc', id: 'asc' } });
  return [
    ...members.map((member) => ({
      id: member.id,
      object: 'approver_candidate' as const,
      type: 'user' as const,
      name: member.name,
      org_role: member.orgRole,
      votes_on_your_activations: callerVoters.has(member.id),
    })),
    ...roles.map((role) => ({ id: role.id, object: 'approver_candidate' as const, type: 'role' as const, name: role.name, member_count: role.members.length })),
  ];
}

/** Approver id (member or role) -> the member ids it stands for. */
export async function approverDirectory(em: EntityManager, organizationId: string): Promise<Map<string, string[]>> {
  const directory = new Map<string, string[]>();
  for (const member of await em.find(Member, { organization: organizationId })) directory.set(member.id, [member.id]);
  for (const role of await em.find(Role, { organization: organizationId }, { populate: ['members'] })) {
    directory.set(role.id, role.members.getItems().map((member) => member.id));
  }
  return directory;
}

export function draftRulesOf(policy: Policy): DraftRule[] {
  return policy.rules
    .getItems()
    .sort((a, b) => a.order - b.order)
    .map((rule) => ({ id: rule.id, name: rule.name, action_type: rule.actionType, action_config: rule.actionConfig, conditions: rule.conditions }));
}

export async function validateRules(em: EntityManager, organizationId: string, rules: DraftRule[]): Promise<ValidationResult> {
  return validatePolicyRules(rules, { approvers: await approverDirectory(em, organizationId) });
}

/** Validates rules not stored yet, in their `order` (listed order for ties and omissions). */
export async function validateDraft(
  em: EntityManager,
  scope: PolicyScope,
  rules: (DraftRule & { order?: number })[],
): Promise<ValidationResult> {
  const ordered = rules
    .map((rule, index) => ({ ...rule, conditions: canonicalConditions(rule.conditions ?? [], scope.environment, { strict: false, param: 'conditions' }), position: rule.order ?? index + 1, index }))
    .sort((a, b) => a.position - b.position || a.index - b.index);
  return validateRules(em, scope.organizationId, ordered);
}

/**
 * Enforces a draft under a row lock, archiving the enforced policy it was copied from, in the
 * caller's transaction. Idempotent: an already enforced policy is left as it is.
 */
export async function enforcePolicy(em: EntityManager, policyId: string, actor: PolicyActor, data: Record<string, unknown>): Promise<Policy> {
  const policy = await em.findOneOrFail(Policy, { id: policyId, organization: actor.organizationId, environment: actor.environment }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (policy.status === 'enforced') return policy;
  if (policy.status !== 'draft') throw errors.conflict('invalid_state_transition', `A ${policy.status} policy cannot be enforced.`);
  policy.status = 'enforced';
  policy.activatedAt = new Date();
  const source = policy.sourcePolicy ? await em.findOne(Policy, { id: policy.sourcePolicy.id }, { lockMode: LockMode.PESSIMISTIC_WRITE }) : null;
  if (source?.status === 'enforced') {
    source.status = 'archived';
    writeAudit(em, { actor, policyId: source.id, action: 'archived', changes: { status: ['enforced', 'archived'] }, metadata: { replaced_by: policy.id } });
  }
  await recordPolicyEvent(em, {
    organizationId: actor.organizationId,
    type: 'policy.activated',
    actor,
    data: { policy_id: policy.id, replaced_policy_id: source?.status === 'archived' ? source.id : null, ...data },
  });
  return policy;
}

