import { LockMode } from '@mikro-orm/core';
import { WorkflowIdConflictPolicy, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { DomainError, errors } from '../shared/errors';
import type { RouteRegistry } from '../http/route';
import { Member, Organization } from '../organizations/entities';
import { ListQuery, listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema, z } from '../shared/schemas';
import { resourceSearchAttributes } from '../temporal/search-attributes';
import { activationWorkflowId, voteUpdate, VOTE_REFUSALS, type PolicyActivationInput } from './activation';
import { ApprovalRequest, Policy, PolicyAuditLog } from './entities';
import { evaluatePolicies } from './evaluator';
import { policySchemaDocument } from './schema';
import {
  ActivateBody,
  ApprovalRequestObject,
  ApproverCandidateObject,
  AuditLogObject,
  CreatePolicyBody,
  CreateRuleBody,
  EvaluateBody,
  EvaluationResultObject,
  ExpandQuery,
  PendingActivationObject,
  PolicyIdParams,
  PolicyListQuery,
  PolicyObject,
  PolicySchemaObject,
  RuleObject,
  RuleParams,
  SimulateBody,
  SimulationObject,
  UpdatePolicyBody,
  UpdateRuleBody,
  ValidateDraftBody,
  ValidationResultObject,
  VoteBody,
  checkActionConfig,
} from './schemas';
import {
  addRule,
  approverCandidates,
  assertEditable,
  canApproveActivations,
  createPolicy,
  draftRulesOf,
  eligibleVoters,
  enforcePolicy,
  enforcedPolicies,
  findApprovalRequest,
  findPolicy,
  moveRule,
  pendingApprovalRequest,
  presentApprovalRequest,
  presentAuditLog,
  presentPolicy,
  presentRule,
  presentTemplate,
  recordPolicyEvent,
  removeRule,
  resolveActor,
  simulatePolicy,
  toEvaluable,
  validateRules,
  writeAudit,
} from './service';
import { POLICY_TEMPLATES } from './templates';

const TAG = 'Policies';
const staticList = <T>(items: T[]) => ({ object: 'list' as const, data: items, has_more: false, next_cursor: null });

export function registerPolicyRoutes(routes: RouteRegistry): void {
  // Fixed paths first, so that `/v1/policies/:id` does not swallow them.
  routes.add({
    method: 'get',
    path: '/v1/policies/schema',
    operationId: 'getPolicySchema',
    summary: 'Condition fields, operators, action types and categories',
    tag: TAG,
    scope: 'policies:read',
    response: { status: 200, description: 'The policy schema', schema: PolicySchemaObject },
    handler: async () => ({ body: policySchemaDocument() }),
  });

  routes.add({
    method: 'get',
    path: '/v1/policies/approver-candidates',
    operationId: 'listApproverCandidates',
    summary: 'Members and roles that can be named as approvers',
    tag: TAG,
    scope: 'policies:read',
    response: { status: 200, description: 'Every candidate (members, then roles)', schema: listEnvelopeSchema(ApproverCandidateObject) },
    handler: async ({ auth, em }) => ({ body: staticList(await approverCandidates(em, auth.organizationId)) }),
  });

  routes.add({
    method: 'get',
    path: '/v1/policy-templates',
    operationId: 'listPolicyTemplates',
    summary: 'Built-in policy templates',
    tag: TAG,
    scope: 'policies:read',
    response: { status: 200, description: 'Templates with their rules', schema: listEnvelopeSchema(PolicyObject) },
    handler: async () => ({ body: staticList(POLICY_TEMPLATES.map(presentTemplate)) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/policies/validate',
    operationId: 'validatePolicyDraft',
    summary: 'Validate a draft policy (not stored); findings are diagnostics',
    tag: TAG,
    scope: 'policies:read',
    body: ValidateDraftBody,
    response: { status: 200, description: 'The validation result', schema: ValidationResultObject },
    handler: async ({ auth, em, body }) => {
      const rules = body.rules
        .map((rule, index) => ({ ...rule, position: rule.order ?? index + 1, index }))
        .sort((a, b) => a.position - b.position || a.index - b.index);
      return { body: await validateRules(em, auth.organizationId, rules, 'draft') };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies/evaluate',
    operationId: 'evaluatePolicies',
    summary: 'Dry-run evaluation with trace',
    description: 'Evaluates the enforced policies (or `policy_id` in any state) against the request. Nothing is sent or recorded.',
    tag: TAG,
    scope: 'policies:read',
    body: EvaluateBody,
    response: { status: 200, description: 'The evaluation result', schema: EvaluationResultObject },
    handler: async ({ auth, em, body }) => {
      const { policy_id, ...request } = body;
      const policies = policy_id ? [await findPolicy(em, auth.organizationId, policy_id)] : await enforcedPolicies(em, auth.organizationId);
      return { body: evaluatePolicies(policies.map(toEvaluable), request) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies',
    operationId: 'createPolicy',
    summary: 'Create a draft policy (optionally from a template or as a copy)',
    tag: TAG,
    scope: 'policies:write',
    body: CreatePolicyBody,
    response: { status: 201, description: 'The draft policy with its rules', schema: PolicyObject },
    handler: async ({ auth, em, body }) => {
      const policy = await createPolicy(em, await resolveActor(em, auth), body);
      await em.flush();
      return { status: 201, body: presentPolicy(policy, true) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/policies',
    operationId: 'listPolicies',
    summary: 'List policies, newest first',
    tag: TAG,
    scope: 'policies:read',
    query: ListQuery.extend(PolicyListQuery.shape),
    response: { status: 200, description: 'A page of policies', schema: listEnvelopeSchema(PolicyObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, Policy, { organization: auth.organizationId, ...(query.status ? { status: query.status } : {}) }, query, ['rules', 'sourcePolicy']);
      return { body: listBody(page, (policy) => presentPolicy(policy, query.expand === 'rules')) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/policies/:id',
    operationId: 'getPolicy',
    summary: 'Read a policy (`?expand=rules` includes its rules)',
    tag: TAG,
    scope: 'policies:read',
    params: PolicyIdParams,
    query: ExpandQuery,
    response: { status: 200, description: 'The policy', schema: PolicyObject },
    handler: async ({ auth, em, params, query }) => ({ body: presentPolicy(await findPolicy(em, auth.organizationId, params.id), query.expand === 'rules') }),
  });

  routes.add({
    method: 'patch',
    path: '/v1/policies/:id',
    operationId: 'updatePolicy',
    summary: 'Update a draft policy (an enforced one answers 409)',
    tag: TAG,
    scope: 'policies:write',
    params: PolicyIdParams,
    body: UpdatePolicyBody,
    response: { status: 200, description: 'The updated policy', schema: PolicyObject },
    handler: async ({ auth, em, params, body }) => {
      const policy = await findPolicy(em, auth.organizationId, params.id);
      await assertEditable(em, policy);
      const changes: Record<string, unknown> = {};
      for (const [field, value] of Object.entries(body) as [keyof typeof body, never][]) {
        if (value === undefined || policy[field] === value) continue;
        changes[field] = [policy[field], value];
        policy[field] = value;
      }
      writeAudit(em, { actor: await resolveActor(em, auth), policyId: policy.id, action: 'updated', changes });
      await em.flush();
      return { body: presentPolicy(policy) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/v1/policies/:id',
    operationId: 'archivePolicy',
    summary: 'Archive a policy (an enforced one stops being enforced)',
    tag: TAG,
    scope: 'policies:write',
    params: PolicyIdParams,
    response: { status: 200, description: 'The archived policy', schema: PolicyObject },
    handler: async ({ auth, em, params }) => {
      const policy = await findPolicy(em, auth.organizationId, params.id);
      if (policy.status === 'draft') await assertEditable(em, policy);
      if (policy.status !== 'archived') {
        writeAudit(em, { actor: await resolveActor(em, auth), policyId: policy.id, action: 'archived', changes: { status: [policy.status, 'archived'] } });
        policy.status = 'archived';
        await em.flush();
      }
      return { body: presentPolicy(policy) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies/:id/rules',
    operationId: 'createPolicyRule',
    summary: 'Add a rule to a draft (appended when `order` is omitted)',
    tag: TAG,
    scope: 'policies:write',
    params: PolicyIdParams,
    body: CreateRuleBody,
    response: { status: 201, description: 'The rule', schema: RuleObject },
    handler: async ({ auth, em, params, body }) => {
      const policy = await findPolicy(em, auth.organizationId, params.id);
      await assertEditable(em, policy);
      const rule = addRule(em, policy, body);
      writeAudit(em, { actor: await resolveActor(em, auth), policyId: policy.id, action: 'rule_added', changes: { rule_id: rule.id, name: rule.name, order: rule.order } });
      await em.flush();
      return { status: 201, body: presentRule(rule, policy) };
    },
  });

  routes.add({
    method: 'patch',
    path: '/v1/policies/:id/rules/:ruleId',
    operationId: 'updatePolicyRule',
    summary: 'Update or move a rule of a draft',
    tag: TAG,
    scope: 'policies:write',
    params: RuleParams,
    body: UpdateRuleBody,
    response: { status: 200, description: 'The rule', schema: RuleObject },
    handler: async ({ auth, em, params, body }) => {
      const policy = await findPolicy(em, auth.organizationId, params.id);
      const rule = policy.rules.getItems().find((r) => r.id === params.ruleId);
      if (!rule) throw errors.notFound('rule', params.ruleId, 'ruleId');
      await assertEditable(em, policy);
      const actionType = body.action_type ?? rule.actionType;
      if (body.action_type || body.action_config) {
        // A new action type needs a config of its own shape: the old config is only kept when it fits.
        const config = body.action_config ?? rule.actionConfig;
        const check = z.unknown().superRefine((value, ctx) => checkActionConfig(actionType, value, ctx)).safeParse(config);
        if (!check.success) throw errors.validation(`action_config does not fit action_type ${actionType}: ${check.error.issues[0]!.message}`, 'action_config');
        rule.actionType = actionType;
        rule.actionConfig = config;
      }
      if (body.name !== undefined) rule.name = body.name;
      if (body.description !== undefined) rule.description = body.description;
      if (body.conditions !== undefined) rule.conditions = body.conditions;
      if (body.order !== undefined) moveRule(policy, rule, body.order);
      writeAudit(em, { actor: await resolveActor(em, auth), policyId: policy.id, action: 'rule_updated', changes: { rule_id: rule.id, ...body } });
      await em.flush();
      return { body: presentRule(rule, policy) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/v1/policies/:id/rules/:ruleId',
    operationId: 'deletePolicyRule',
    summary: 'Delete a rule of a draft (later rules move up)',
    tag: TAG,
    scope: 'policies:write',
    params: RuleParams,
    response: { status: 200, description: 'The policy with its remaining rules', schema: PolicyObject },
    handler: async ({ auth, em, params }) => {
      const policy = await findPolicy(em, auth.organizationId, params.id);
      const rule = policy.rules.getItems().find((r) => r.id === params.ruleId);
      if (!rule) throw errors.notFound('rule', params.ruleId, 'ruleId');
      await assertEditable(em, policy);
      removeRule(em, policy, rule);
      writeAudit(em, { actor: await resolveActor(em, auth), policyId: policy.id, action: 'rule_deleted', changes: { rule_id: rule.id, name: rule.name } });
      await em.flush();
      return { body: presentPolicy(policy, true) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies/:id/validate',
    operationId: 'validatePolicy',
    summary: 'Validate a stored policy (diagnostics carry rule_id)',
    tag: TAG,
    scope: 'policies:read',
    params: PolicyIdParams,
    response: { status: 200, description: 'The validation result', schema: ValidationResultObject },
    handler: async ({ auth, em, params }) => {
      const policy = await findPolicy(em, auth.organizationId, params.id);
      return { body: await validateRules(em, auth.organizationId, draftRulesOf(policy), policy.status === 'draft' ? 'draft' : 'activation') };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies/:id/simulate',
    operationId: 'simulatePolicy',
    summary: 'What-if: replay requests as if this policy were enforced',
    description: 'Evaluates each request against the enforced policies with this one enforced in its place (replacing its source). Nothing is written.',
    tag: TAG,
    scope: 'policies:read',
    params: PolicyIdParams,
    body: SimulateBody,
    response: { status: 200, description: 'Counts and examples per outcome', schema: SimulationObject },
    handler: async ({ auth, em, params, body }) => {
      const policy = await findPolicy(em, auth.organizationId, params.id);
      return { body: await simulatePolicy(em, policy, body.requests, body.example_limit) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/policies/:id/audit-logs',
    operationId: 'listPolicyAuditLogs',
    summary: 'Audit log of a policy, newest first',
    tag: TAG,
    scope: 'policies:read',
    params: PolicyIdParams,
    query: ListQuery,
    response: { status: 200, description: 'A page of audit entries', schema: listEnvelopeSchema(AuditLogObject) },
    handler: async ({ auth, em, params, query }) => {
      const policy = await findPolicy(em, auth.organizationId, params.id);
      const page = await paginate(em, PolicyAuditLog, { organization: auth.organizationId, policyId: policy.id }, query);
      return { body: listBody(page, presentAuditLog) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies/:id/activate',
    operationId: 'activatePolicy',
    summary: 'Request activation: 202 pending approvals, or 200 enforced when none are required',
    tag: TAG,
    scope: 'policies:write',
    params: PolicyIdParams,
    body: ActivateBody.extend({
      expiry_hours: z.number().int().min(1).max(720).optional().openapi({ description: 'Approval window; default POLICY_ACTIVATION_EXPIRY_HOURS (72)' }),
    }),
    response: { status: 202, description: 'Pending activation response (200 with the policy when no approvals are required)', schema: PendingActivationObject },
    handler: async ({ auth, em, deps, params, body }) => {
      const actor = await resolveActor(em, auth);
      const policy = await findPolicy(em, auth.organizationId, params.id);
      // Serializes concurrent activations of one policy, so only one request can be pending.
      await em.lock(policy, LockMode.PESSIMISTIC_WRITE);
      if (policy.status !== 'draft') throw errors.conflict('invalid_state_transition', `Only a draft can be activated; this policy is ${policy.status}.`);
      const pending = await pendingApprovalRequest(em, policy);
      if (pending) throw errors.conflict('activation_pending', 'An activation request for this policy is already pending.', { approval_request_id: pending.id });
      const validation = await validateRules(em, auth.organizationId, draftRulesOf(policy), 'activation');
      if (!validation.valid) {
        throw new DomainError({ kind: 'invalid', code: 'policy_invalid', message: 'The policy has errors; fix them before activating.', details: { diagnostics: validation.diagnostics, issue_count: validation.issue_count } });
      }
      const organization = await em.findOneOrFail(Organization, { id: auth.organizationId });
      const requiredApprovals = organization.policyActivationRequiredApprovals;
      const comment = body.comment ?? '';
      if (requiredApprovals === 0) {
        await enforcePolicy(em, policy.id, actor, { comment, approvals_required: 0 });
        await em.flush();
        return { status: 200, body: presentPolicy(policy, true) };
      }
      const voters = await eligibleVoters(em, auth.organizationId, actor.id);
      if (voters.length < requiredApprovals) {
        throw errors.conflict('not_enough_approvers', `Activation needs ${requiredApprovals} approval(s) but only ${voters.length} other owner/admin/approver member(s) can vote.`, {
          required_approvals: requiredApprovals,
          eligible_approvers: voters.length,
        });
      }
      const expiresAt = new Date(Date.now() + (body.expiry_hours ?? deps.config.POLICY_ACTIVATION_EXPIRY_HOURS) * 3_600_000);
      const request = em.create(ApprovalRequest, {
        organization,
        policy,
        requestedBy: actor.id,
        requestedByName: actor.name,
        comment,
        requiredApprovals,
        expiresAt,
        createdAt: new Date(),
      });
      await recordPolicyEvent(em, {
        organizationId: auth.organizationId,
        type: 'policy.activation_requested',
        actor,
        data: { policy_id: policy.id, approval_request_id: request.id, required_approvals: requiredApprovals, expires_at: expiresAt.toISOString(), comment },
      });
      await em.flush();
      const input: PolicyActivationInput = {
        approvalRequestId: request.id,
        organizationId: auth.organizationId,
        policyId: policy.id,
        requesterId: actor.id,
        requiredApprovals,
        expiresAt: expiresAt.toISOString(),
      };
      // Started inside the transaction: if the start fails, the request row rolls back with it.
      await deps.temporal.client.workflow.start('policyActivationWorkflow', {
        taskQueue: deps.config.TEMPORAL_TASK_QUEUE,
        workflowId: activationWorkflowId(request.id),
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
        args: [input],
        typedSearchAttributes: resourceSearchAttributes({ organizationId: auth.organizationId, type: 'policy', id: policy.id }),
      });
      return {
        status: 202,
        body: {
          status: 'pending_authorization' as const,
          policy_id: policy.id,
          approval_request_id: request.id,
          required_approvals: requiredApprovals,
          expires_at: expiresAt.toISOString(),
          message: `Activation needs ${requiredApprovals} approval(s) before ${expiresAt.toISOString()}; poll the policy until status is enforced.`,
        },
      };
    },
  });

  for (const decision of ['approve', 'reject'] as const) {
    routes.add({
      method: 'post',
      path: `/v1/approval-requests/:id/${decision}`,
      operationId: decision === 'approve' ? 'approveApprovalRequest' : 'rejectApprovalRequest',
      summary: decision === 'approve' ? 'Approve an activation request' : 'Reject an activation request (ends it)',
      description: 'The key must act for a member (user_id) with org_role owner, admin or approver, other than the requester.',
      tag: TAG,
      scope: 'policies:approve',
      params: PolicyIdParams,
      body: VoteBody,
      response: { status: 200, description: 'The approval request after the vote', schema: ApprovalRequestObject },
      handler: async ({ auth, em, deps, params, body }) => {
        const request = await findApprovalRequest(em, auth.organizationId, params.id);
        if (!auth.memberId) {
          throw errors.permission('member_required', 'Votes are cast by members: use a key that acts for a member (created with user_id).');
        }
        const member = await em.findOneOrFail(Member, { id: auth.memberId });
        if (!canApproveActivations(member)) {
          throw errors.permission('not_an_approver', `A member with org_role ${member.orgRole} cannot vote; owners, admins and approvers can.`);
        }
        if (member.id === request.requestedBy) throw errors.permission('requester_cannot_vote', 'The requester cannot vote on their own activation request.');
        if (request.status !== 'pending') throw closed(request.status);
        try {
          await deps.temporal.client.workflow
            .getHandle(activationWorkflowId(request.id))
            .executeUpdate(voteUpdate, { args: [{ memberId: member.id, decision, comment: body.comment }] });
        } catch (error) {
          const cause = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
          if (cause instanceof ApplicationFailure && cause.type === VOTE_REFUSALS.requester) throw errors.permission('requester_cannot_vote', cause.message);
          if (cause instanceof ApplicationFailure && cause.type === VOTE_REFUSALS.expired) throw closed('expired');
          // Closed meanwhile (decided, or the workflow finished at expiry): answer with the stored state.
          const fresh = await deps.orm.em.fork().findOne(ApprovalRequest, { id: request.id });
          if (fresh && fresh.status !== 'pending') throw closed(fresh.status);
          if (cause instanceof ApplicationFailure && cause.type === VOTE_REFUSALS.closed) throw closed('decided');
          throw error;
        }
        return { body: presentApprovalRequest(await findApprovalRequest(deps.orm.em.fork(), auth.organizationId, request.id)) };
      },
    });
  }
}

function closed(status: string): DomainError {
  return errors.conflict('approval_request_closed', `The approval request is ${status}; it takes no more votes.`, { status });
}
