import { iso, isoOrNull } from '../shared/time';
import type { ApprovalRequest, ApprovalRequestKind, Policy, PolicyAuditLog, PolicyRule } from './entities';
import { activationWorkflowId } from './flows/activation';
import { entryApprovalWorkflowId } from './flows/address-book-entry-approval';
import { governanceChangeWorkflowId } from './flows/governance-change';
import { transactionApprovalWorkflowId } from './flows/transaction-approval';
import type { PolicyTemplate } from './templates';

export function presentRule(rule: PolicyRule, policy: Policy) {
  return {
    id: rule.id,
    object: 'rule' as const,
    policy_id: policy.id,
    name: rule.name,
    description: rule.description,
    action_type: rule.actionType,
    action_config: rule.actionConfig,
    conditions: rule.conditions,
    order: rule.order,
    priority: policy.priority,
    created_at: iso(rule.createdAt),
    updated_at: iso(rule.updatedAt),
  };
}

export function presentPolicy(policy: Policy, expandRules = false) {
  const rules = policy.rules.getItems();
  return {
    id: policy.id,
    object: 'policy' as const,
    name: policy.name,
    description: policy.description,
    category: policy.category,
    status: policy.status,
    is_active: policy.status === 'enforced',
    is_template: false,
    template_id: policy.templateId ?? null,
    source_policy_id: policy.sourcePolicy?.id ?? null,
    priority: policy.priority,
    rule_count: rules.length,
    ...(expandRules ? { rules: rules.map((rule) => presentRule(rule, policy)) } : {}),
    created_by: policy.createdBy,
    created_by_name: policy.createdByName,
    activated_at: isoOrNull(policy.activatedAt),
    created_at: iso(policy.createdAt),
    updated_at: iso(policy.updatedAt),
  };
}

const TEMPLATE_EPOCH = '2026-01-01T00:00:00.000Z';

export function presentTemplate(template: PolicyTemplate) {
  return {
    id: template.id,
    object: 'policy' as const,
    name: template.name,
    description: template.description,
    category: template.category,
    status: 'draft' as const,
    is_active: false,
    is_template: true,
    template_id: null,
    source_policy_id: null,
    priority: 100,
    rule_count: template.rules.length,
    rules: template.rules.map((rule, index) => ({
      id: `${template.id}_rule_${index + 1}`,
      object: 'rule' as const,
      policy_id: template.id,
      ...rule,
      order: index + 1,
      priority: 100,
      created_at: TEMPLATE_EPOCH,
      updated_at: TEMPLATE_EPOCH,
    })),
    created_by: 'system',
    created_by_name: 'Built-in template',
    activated_at: null,
    created_at: TEMPLATE_EPOCH,
    updated_at: TEMPLATE_EPOCH,
  };
}

export function presentAuditLog(entry: PolicyAuditLog) {
  return {
    id: entry.id,
    object: 'policy_audit_log' as const,
    policy_id: entry.policyId ?? null,
    action: entry.action,
    actor_id: entry.actorId,
    actor_name: entry.actorName,
    changes: entry.changes,
    metadata: entry.metadata,
    created_at: iso(entry.createdAt),
  };
}

/** The 202 answer of a change that now awaits approvals (a policy's activation, an address-book entry's early use, a change request); the caller adds its subject. */
export function presentPendingApproval(request: ApprovalRequest, change: string, poll: string) {
  const expiresAt = iso(request.expiresAt);
  return {
    status: 'pending_authorization' as const,
    approval_request_id: request.id,
    workflow_id: approvalWorkflowId(request),
    required_approvals: request.requiredApprovals,
    expires_at: expiresAt,
    message: `${change} needs ${request.requiredApprovals} approval(s) before ${expiresAt}; ${poll}.`,
  };
}

/** What a request approves. */
export const approvalRequestKind = (request: ApprovalRequest): ApprovalRequestKind =>
  request.transactionDigest ? 'transaction' : request.addressBookEntry ? 'address_book_entry' : request.governanceChange ? 'governance_change' : 'policy_activation';

const WORKFLOW_IDS: Record<ApprovalRequestKind, (approvalRequestId: string) => string> = {
  policy_activation: activationWorkflowId,
  address_book_entry: entryApprovalWorkflowId,
  transaction: transactionApprovalWorkflowId,
  governance_change: governanceChangeWorkflowId,
};

/** The workflow carrying a request's votes, by what it approves. */
export const approvalWorkflowId = (request: ApprovalRequest): string => WORKFLOW_IDS[approvalRequestKind(request)](request.id);

export function presentApprovalRequest(request: ApprovalRequest) {
  const votes = request.votes.getItems();
  return {
    id: request.id,
    object: 'approval_request' as const,
    kind: approvalRequestKind(request),
    policy_id: request.policy?.id ?? null,
    address_book_entry_id: request.addressBookEntry?.id ?? null,
    governance_change_id: request.governanceChange?.id ?? null,
    transaction: request.transactionDigest
      ? {
          request: request.transactionRequest ?? {},
          held_by_policy_id: request.heldByPolicyId ?? null,
          held_by_rule_id: request.heldByRuleId ?? null,
          approver_ids: request.approverMemberIds ?? [],
          used_at: isoOrNull(request.consumedAt),
          transaction_id: request.consumedByTransactionId ?? null,
        }
      : null,
    status: request.status,
    requested_by: request.requestedBy,
    requested_by_name: request.requestedByName,
    comment: request.comment,
    required_approvals: request.requiredApprovals,
    approvals: votes.filter((vote) => vote.decision === 'approve').length,
    votes: votes.map((vote) => ({ user_id: vote.member.id, decision: vote.decision, comment: vote.comment, created_at: iso(vote.createdAt) })),
    expires_at: iso(request.expiresAt),
    decided_at: isoOrNull(request.decidedAt),
    workflow_id: approvalWorkflowId(request),
    created_at: iso(request.createdAt),
  };
}
