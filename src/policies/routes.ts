import type { FilterQuery } from '@mikro-orm/postgresql';
import { requireScope } from '../api-keys/scopes';
import type { RouteRegistry } from '../http/route';
import { ListQuery, listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema, z } from '../shared/schemas';
import { eligibleVoters, findApprovalRequest, requestActivation } from './approvals';
import { castVote } from './votes';
import { presentChangeRequest, requestArchive } from './change-requests';
import { PendingChangeObject } from './governance-schemas';
import { ApprovalRequest, Policy, PolicyAuditLog, type ApprovalRequestKind } from './entities';
import { simulateHistory } from './history';
import { presentApprovalRequest, presentAuditLog, presentPendingApproval, presentPolicy, presentRule, presentTemplate } from './presenters';
import { policySchemaDocument } from './schema';
import {
  ActivateBody,
  ApproverCandidateObject,
  AuditLogObject,
  CreatePolicyBody,
  CreateRuleBody,
  EvaluateBody,
  EvaluationResultObject,
  HistorySimulationObject,
  ExpandQuery,
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
} from './schemas';
import { ApprovalRequestListQuery, ApprovalRequestObject, PendingActivationObject, VoteBody } from './approval-schemas';
import {
  approverCandidates,
  createPolicy,
  createRule,
  deleteRule,
  draftRulesOf,
  findPolicy,
  resolveActor,
  updatePolicy,
  updateRule,
  validateDraft,
  validateRules,
} from './service';
import { evaluate, simulatePolicy } from './decisions';
import { POLICY_TEMPLATES } from './templates';

const TAG = 'Policies';

/** Each kind by the subject column it sets (an approval request has exactly one). */
const APPROVAL_KIND_FILTERS = {
  policy_activation: { policy: { $ne: null } },
  address_book_entry: { addressBookEntry: { $ne: null } },
  transaction: { transactionDigest: { $ne: null } },
  governance_change: { governanceChange: { $ne: null } },
} satisfies Record<ApprovalRequestKind, FilterQuery<ApprovalRequest>>;
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
    summary: 'Members and roles that can be named as approvers; each member says whether it may vote on the caller\'s activation requests',
    tag: TAG,
    scope: 'policies:read',
    response: { status: 200, description: 'Every candidate (members, then roles)', schema: listEnvelopeSchema(ApproverCandidateObject) },
    handler: async ({ auth, em }) => {
      const voters = new Set((await eligibleVoters(em, await resolveActor(em, auth))).map((member) => member.id));
      return { body: staticList(await approverCandidates(em, auth.organizationId, voters)) };
    },
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
    handler: async ({ auth, em, body }) => ({ body: await validateDraft(em, auth, body.rules) }),
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
      return { body: await evaluate(em, auth, request, policy_id) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies',
    operationId: 'createPolicy',
    summary: 'Create a draft policy (optionally from a template or as a copy)',
    description:
      'An environment holds at most MAX_POLICIES policies that are not archived (one more: 409 `limit_reached`), each at most MAX_POLICY_RULES rules ' +
      '(more, copied and given together: 400 `validation_failed` on rules). See docs/limits.md.',
    tag: TAG,
    scope: 'policies:write',
    body: CreatePolicyBody,
    response: { status: 201, description: 'The draft policy with its rules', schema: PolicyObject },
    handler: async ({ auth, em, body, deps }) => {
      const policy = await createPolicy(em, deps.config, await resolveActor(em, auth), body);
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
      const page = await paginate(em, Policy, { organization: auth.organizationId, environment: auth.environment, ...(query.status ? { status: query.status } : {}) }, query, ['rules', 'sourcePolicy']);
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
    handler: async ({ auth, em, params, query }) => ({ body: presentPolicy(await findPolicy(em, auth, params.id), query.expand === 'rules') }),
  });

  routes.add({
    method: 'patch',
    path: '/v1/policies/:id',
    operationId: 'updatePolicy',
    summary: 'Update a draft policy (an enforced one answers 409: copy it and activate the copy, which takes the quorum)',
    tag: TAG,
    scope: 'policies:write',
    params: PolicyIdParams,
    body: UpdatePolicyBody,
    response: { status: 200, description: 'The updated policy', schema: PolicyObject },
    handler: async ({ auth, em, params, body }) => ({ body: presentPolicy(await updatePolicy(em, await resolveActor(em, auth), params.id, body)) }),
  });

  routes.add({
    method: 'delete',
    path: '/v1/policies/:id',
    operationId: 'archivePolicy',
    summary: 'Archive a policy: a draft at once; an enforced one through a change request (202)',
    description:
      "Archiving an enforced policy loosens the controls: it is a change request under the organization's activation quorum (202 with its approval_request_id); " +
      'the policy stays enforced until the quorum approves, and lapses at expires_at. With no approvals required it is archived at once (200). See docs/policies.md, Governance.',
    tag: TAG,
    scope: 'policies:write',
    params: PolicyIdParams,
    response: { status: 200, description: 'The archived policy', schema: PolicyObject },
    otherResponses: [{ status: 202, description: 'The archive waits for approvals', schema: PendingChangeObject.extend({ policy_id: z.string() }).openapi('PendingPolicyArchive') }],
    handler: async ({ auth, em, params, deps }) => {
      const outcome = await requestArchive(em, await resolveActor(em, auth), params.id, { expiryHours: deps.config.POLICY_ACTIVATION_EXPIRY_HOURS });
      if (outcome.status === 'archived') return { body: presentPolicy(outcome.policy) };
      return { status: 202, body: { ...presentChangeRequest(outcome, 'Archiving the enforced policy'), policy_id: params.id } };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies/:id/rules',
    operationId: 'createPolicyRule',
    summary: 'Add a rule to a draft (appended when `order` is omitted)',
    description: 'A policy holds at most MAX_POLICY_RULES rules: one more is 409 `limit_reached` (details limit, current). See docs/limits.md.',
    tag: TAG,
    scope: 'policies:write',
    params: PolicyIdParams,
    body: CreateRuleBody,
    response: { status: 201, description: 'The rule', schema: RuleObject },
    handler: async ({ auth, em, params, body, deps }) => {
      const { policy, rule } = await createRule(em, deps.config, await resolveActor(em, auth), params.id, body);
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
      const { policy, rule } = await updateRule(em, await resolveActor(em, auth), params.id, params.ruleId, body);
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
    handler: async ({ auth, em, params }) => ({ body: presentPolicy(await deleteRule(em, await resolveActor(em, auth), params.id, params.ruleId), true) }),
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
      const policy = await findPolicy(em, auth, params.id);
      return { body: await validateRules(em, auth.organizationId, draftRulesOf(policy)) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/policies/:id/simulate',
    operationId: 'simulatePolicy',
    summary: 'What-if: replay requests, or the past transactions of a time window, as if this policy were enforced',
    description:
      'Evaluates each request against the enforced policies with this one enforced in its place (replacing its source). With `history`, replays the ' +
      "environment's transactions and refused requests of the window in time order, velocity fields recomputed as the draft would have seen them, " +
      'and reports what would have been blocked, held for approval or delayed against what happened (needs `custody:read` as well). Nothing is written.',
    tag: TAG,
    scope: 'policies:read',
    params: PolicyIdParams,
    body: SimulateBody,
    response: {
      status: 200,
      description: 'Counts and examples per outcome (`policy_simulation` for requests, `policy_history_simulation` for history)',
      schema: z.union([SimulationObject, HistorySimulationObject]),
    },
    handler: async ({ auth, em, params, body }) => {
      const policy = await findPolicy(em, auth, params.id);
      if ('history' in body) {
        // The report shows transactions (ids, amounts, addresses): what reading them takes too.
        requireScope(auth.scopes, 'custody:read');
        const { from, to, wallet_id, include_refused } = body.history;
        return { body: await simulateHistory(em, policy, { from: new Date(from), to: new Date(to), walletId: wallet_id, includeRefused: include_refused }, body.example_limit) };
      }
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
      const policy = await findPolicy(em, auth, params.id);
      const page = await paginate(em, PolicyAuditLog, { organization: auth.organizationId, environment: auth.environment, policyId: policy.id }, query);
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
      const outcome = await requestActivation(em, await resolveActor(em, auth), params.id, {
        comment: body.comment,
        expiryHours: body.expiry_hours ?? deps.config.POLICY_ACTIVATION_EXPIRY_HOURS,
      });
      if (outcome.status === 'enforced') return { status: 200, body: presentPolicy(outcome.policy, true) };
      return {
        status: 202,
        body: { policy_id: params.id, ...presentPendingApproval(outcome.request, 'Activation', 'poll the policy until status is enforced') },
      };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/approval-requests',
    operationId: 'listApprovalRequests',
    summary: 'List approval requests, newest first (filters status and kind)',
    description:
      "What waits for approvers in the key's organization and environment: policy activations, address-book entries before their cooling period ends, " +
      'and sends a require_approval rule held. `?status=pending` lists what can still be voted on.',
    tag: TAG,
    scope: 'policies:approve',
    query: ListQuery.extend(ApprovalRequestListQuery.shape),
    response: { status: 200, description: 'A page of approval requests', schema: listEnvelopeSchema(ApprovalRequestObject) },
    handler: async ({ auth, em, query }) => {
      const where = {
        organization: auth.organizationId,
        environment: auth.environment,
        ...(query.status ? { status: query.status } : {}),
        ...(query.kind ? APPROVAL_KIND_FILTERS[query.kind] : {}),
      };
      const page = await paginate(em, ApprovalRequest, where, query, ['votes', 'votes.member', 'policy', 'addressBookEntry', 'governanceChange']);
      return { body: listBody(page, presentApprovalRequest) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/approval-requests/:id',
    operationId: 'getApprovalRequest',
    summary: 'Read an approval request with its votes',
    tag: TAG,
    scope: 'policies:approve',
    params: PolicyIdParams,
    response: { status: 200, description: 'The approval request', schema: ApprovalRequestObject },
    handler: async ({ auth, em, params }) => ({ body: presentApprovalRequest(await findApprovalRequest(em, auth, params.id)) }),
  });

  for (const decision of ['approve', 'reject'] as const) {
    routes.add({
      method: 'post',
      path: `/v1/approval-requests/:id/${decision}`,
      operationId: decision === 'approve' ? 'approveApprovalRequest' : 'rejectApprovalRequest',
      summary: decision === 'approve' ? 'Approve an approval request' : 'Reject an approval request (ends it)',
      description:
        "A policy activation's, an address-book entry's (POST /v1/address-book/{id}/approval-requests) or a held send's (POST /v1/transactions, 400 policy_approval_required). " +
        'The key must act for a member (user_id) other than the requester: with org_role owner, admin or approver, or for a held send one of the approvers its rule names.',
      tag: TAG,
      scope: 'policies:approve',
      // The vote waits for the workflow's answer: in no transaction, so it holds no pooled connection meanwhile.
      ownTransactions: true,
      params: PolicyIdParams,
      body: VoteBody,
      response: { status: 200, description: 'The approval request after the vote', schema: ApprovalRequestObject },
      handler: async ({ auth, em, deps, params, body }) => {
        await castVote(em, deps.starter, auth, params.id, { decision, comment: body.comment });
        // Read afresh: the vote and its outcome were committed by the workflow's activities.
        return { body: presentApprovalRequest(await findApprovalRequest(deps.orm.em.fork(), auth, params.id)) };
      },
    });
  }
}
