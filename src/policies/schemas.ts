import { BaseUnitAmount, DisplayAmount, INT4_MAX, text, Timestamp, trimmedText, z } from '../shared/schemas';
import { POLICY_STATUSES } from './entities';
import { EVALUATION_RESULTS, OUTCOMES } from './evaluator';
import { TRANSACTION_STATUSES } from '../transactions/entities';
import { ACTION_CONFIG_SCHEMAS, ACTION_TYPES, actionConfigJsonSchema, ACTOR_TYPES, CATEGORY_VALUES, CONDITION_FIELD_NAMES, DESTINATION_TYPES, OPERATION_TYPES, OPERATOR_NAMES, ScalarValue, SOURCE_TYPES, TX_TYPES } from './schema';
import { describeIssue } from '../shared/validation-messages';

const ConditionShape = {
  value: ScalarValue.optional(),
  values: z.array(ScalarValue).max(500).optional(),
  min: ScalarValue.optional(),
  max: ScalarValue.optional(),
};

/** A stored rule's condition: field and operator from the allowlist; operands checked by validate. */
export const ConditionInput = z
  .object({ field: z.enum(CONDITION_FIELD_NAMES as [string, ...string[]]), operator: z.enum(OPERATOR_NAMES), ...ConditionShape })
  .strict()
  .openapi('PolicyCondition');

/** A draft condition for validation: anything goes, the validator reports what is wrong. */
const DraftCondition = z.object({ field: text(0, 100), operator: text(0, 100), ...ConditionShape }).strict();

const RuleName = trimmedText(2, 255);
const Description = text(0, 1000);
// A rule's position, stored as a PostgreSQL integer.
const RuleOrder = z.number().int().min(1).max(INT4_MAX);

const ActionConfig = z.record(z.string(), z.unknown()).openapi({ description: 'Shape depends on action_type; see GET /v1/policies/schema' });

/**
 * checkActionConfig below, as the document says it: one branch per action type with its config's
 * schema, required where `{}` is not a config of that type.
 */
const ACTION_CONFIG_BY_TYPE = ACTION_TYPES.map((type) => ({
  properties: { action_type: { const: type }, action_config: actionConfigJsonSchema(type) },
  ...(ACTION_CONFIG_SCHEMAS[type].safeParse({}).success ? {} : { required: ['action_config'] }),
}));

export const CreateRuleBody = z
  .object({
    name: RuleName,
    description: Description.optional(),
    action_type: z.enum(ACTION_TYPES),
    action_config: ActionConfig.optional(),
    conditions: z.array(ConditionInput).max(50).optional(),
    order: RuleOrder.optional().openapi({ description: '1-based position; appended when omitted' }),
  })
  .strict()
  .superRefine((rule, ctx) => checkActionConfig(rule.action_type, rule.action_config, ctx))
  .openapi('CreatePolicyRuleRequest', { oneOf: ACTION_CONFIG_BY_TYPE });

export const UpdateRuleBody = z
  .object({
    name: RuleName.optional(),
    description: Description.optional(),
    action_type: z.enum(ACTION_TYPES).optional(),
    action_config: ActionConfig.optional(),
    conditions: z.array(ConditionInput).max(50).optional(),
    order: RuleOrder.optional(),
  })
  .strict()
  .openapi('UpdatePolicyRuleRequest');

export function checkActionConfig(actionType: (typeof ACTION_TYPES)[number], config: unknown, ctx: z.RefinementCtx): void {
  const parsed = ACTION_CONFIG_SCHEMAS[actionType].safeParse(config ?? {}, { error: describeIssue });
  if (!parsed.success) {
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: ['action_config', ...issue.path.map(String)] });
  }
}

const PolicyName = trimmedText(2, 100);

export const CreatePolicyBody = z
  .object({
    name: PolicyName.optional().openapi({ description: 'Required unless template_id or source_policy_id gives one' }),
    description: Description.optional(),
    category: z.enum(CATEGORY_VALUES).optional().openapi({ description: 'Default access' }),
    priority: z.number().int().min(0).max(1_000_000).optional().openapi({ description: 'Lower is evaluated first; default 100' }),
    rules: z.array(CreateRuleBody).max(100).optional(),
    template_id: text(0, 64).optional().openapi({ description: 'Copy the rules of a built-in template' }),
    source_policy_id: text(0, 64).optional().openapi({ description: 'Copy a policy into a new draft that replaces it when enforced' }),
  })
  .strict()
  .openapi('CreatePolicyRequest');

export const UpdatePolicyBody = z
  .object({ name: PolicyName.optional(), description: Description.optional(), category: z.enum(CATEGORY_VALUES).optional(), priority: z.number().int().min(0).max(1_000_000).optional() })
  .strict()
  .openapi('UpdatePolicyRequest');

export const ValidateDraftBody = z
  .object({
    name: text(0, 100).optional(),
    description: Description.optional(),
    rules: z
      .array(
        z
          .object({
            action_type: z.enum(ACTION_TYPES),
            name: text(0, 255).optional(),
            description: Description.optional(),
            conditions: z.array(DraftCondition).max(50).optional(),
            action_config: z.unknown().optional(),
            order: z.number().int().min(-INT4_MAX - 1).max(INT4_MAX).optional(),
          })
          .strict(),
      )
      .max(100)
      .default([]),
  })
  .strict()
  .openapi('ValidatePolicyDraftRequest');

const requestField = () => text(0, 500).optional();
// Bounded, as amounts are: a count is compared as a decimal, and a million digits would cost the event loop.
const VelocityCount = z.string().regex(/^\d{1,20}$/, 'must be a count of transactions, at most 20 digits');

/** The evaluate request: every condition field (velocity fields in a dry run come from here). */
export const EvaluateRequestFields = z.object({
  actor_type: z.enum(ACTOR_TYPES).optional(),
  actor_id: requestField(),
  user_id: requestField(),
  amount: DisplayAmount.optional(),
  amount_raw: BaseUnitAmount.optional(),
  amount_usd: DisplayAmount.optional(),
  fee_raw: BaseUnitAmount.optional(),
  fee_usd: DisplayAmount.optional(),
  price_unavailable: z.boolean().optional().openapi({ description: 'The USD value is unknown or stale: block, require_approval and delay rules take absent USD and value fields (amount, amount_raw, asset_symbol) to meet their conditions' }),
  asset_symbol: requestField(),
  chain: requestField(),
  network: requestField(),
  from_address: requestField(),
  to_address: requestField(),
  token_address: requestField(),
  wallet_id: requestField(),
  vault_id: requestField(),
  connection_id: requestField(),
  operation_type: z.enum(OPERATION_TYPES).optional(),
  tx_type: z.enum(TX_TYPES).optional(),
  source_type: z.enum(SOURCE_TYPES).optional(),
  destination_type: z.enum(DESTINATION_TYPES).optional(),
  is_automated: z.boolean().optional(),
  automation_rule_id: requestField(),
  velocity_amount_usd_24h: DisplayAmount.optional(),
  velocity_amount_usd_1h: DisplayAmount.optional(),
  velocity_count_24h: VelocityCount.optional(),
  velocity_count_1h: VelocityCount.optional(),
  spender: requestField(),
  approval_count: z.number().int().min(0).max(INT4_MAX).optional().openapi({ description: 'Approvals already collected for this transaction' }),
});

export const EvaluateBody = EvaluateRequestFields.extend({
  policy_id: text(0, 64).optional().openapi({ description: 'Evaluate this policy in any state; absent: the enforced policies' }),
})
  .strict()
  .openapi('EvaluatePolicyRequest');

/** The longest window a history simulation replays. */
export const HISTORY_WINDOW_MAX_DAYS = 90;

/** The past a simulation replays: the environment's transactions and refused requests in [from, to). */
export const SimulateHistory = z
  .object({
    from: z.iso.datetime({ offset: true }).openapi({ description: 'Start of the window (inclusive)' }),
    to: z.iso.datetime({ offset: true }).openapi({ description: `End of the window (exclusive); at most ${HISTORY_WINDOW_MAX_DAYS} days after from` }),
    wallet_id: text(0, 64).optional().openapi({ description: "Report only this wallet's requests (velocity stays organization-wide)" }),
    include_refused: z.boolean().default(true).openapi({ description: 'Also replay the requests the policies refused (from the policy audit log)' }),
  })
  .strict()
  .superRefine((window, ctx) => {
    const span = Date.parse(window.to) - Date.parse(window.from);
    if (span <= 0) ctx.addIssue({ code: 'custom', message: 'to must be after from', path: ['to'] });
    else if (span > HISTORY_WINDOW_MAX_DAYS * 86_400_000) ctx.addIssue({ code: 'custom', message: `the window is at most ${HISTORY_WINDOW_MAX_DAYS} days`, path: ['to'] });
  })
  .openapi('PolicySimulationHistory', { description: "Replay the environment's past requests of a time window" });

const ExampleLimit = z.number().int().min(0).max(20).default(3);

/** Exactly one of requests and history: two strict shapes, so the document says it too (anyOf), not a refinement it cannot show. */
export const SimulateBody = z
  .union([
    z
      .object({
        requests: z.array(EvaluateRequestFields.strict()).min(1).max(1000).openapi({ description: 'Evaluate requests to replay' }),
        example_limit: ExampleLimit,
      })
      .strict(),
    z.object({ history: SimulateHistory, example_limit: ExampleLimit }).strict(),
  ])
  .openapi('SimulatePolicyRequest', { description: 'Exactly one of requests and history' });

export const ActivateBody = z.object({ comment: text(0, 500).optional() }).strict().openapi('ActivatePolicyRequest');

export const PolicyIdParams = z.object({ id: text(1, 64) });
export const RuleParams = z.object({ id: text(1, 64), ruleId: text(1, 64) });
export const ExpandQuery = z.object({ expand: z.enum(['rules']).optional() });
export const PolicyListQuery = z.object({ expand: z.enum(['rules']).optional(), status: z.enum(POLICY_STATUSES).optional() });

export const ConditionObject = z
  .object({ field: z.string(), operator: z.string(), value: ScalarValue.optional(), values: z.array(ScalarValue).optional(), min: ScalarValue.optional(), max: ScalarValue.optional() })
  .openapi('PolicyConditionObject');

export const RuleObject = z
  .object({
    id: z.string(),
    object: z.literal('rule'),
    policy_id: z.string(),
    name: z.string(),
    description: z.string(),
    action_type: z.enum(ACTION_TYPES),
    action_config: z.record(z.string(), z.unknown()),
    conditions: z.array(ConditionObject),
    order: z.number().int(),
    priority: z.number().int().openapi({ description: "The policy's priority (rules are ordered by `order` within it)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('PolicyRule');

export const PolicyObject = z
  .object({
    id: z.string(),
    object: z.literal('policy'),
    name: z.string(),
    description: z.string(),
    category: z.enum(CATEGORY_VALUES),
    status: z.enum(POLICY_STATUSES),
    is_active: z.boolean(),
    is_template: z.boolean(),
    template_id: z.string().nullable(),
    source_policy_id: z.string().nullable(),
    priority: z.number().int(),
    rule_count: z.number().int(),
    rules: z.array(RuleObject).optional(),
    created_by: z.string(),
    created_by_name: z.string(),
    activated_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi('Policy');

export const PolicySchemaObject = z
  .object({
    object: z.literal('policy_schema'),
    action_types: z.array(z.object({ value: z.string(), description: z.string(), config_schema: z.record(z.string(), z.unknown()) })),
    categories: z.array(z.object({ value: z.string(), description: z.string() })),
    condition_fields: z.array(
      z.object({ name: z.string(), description: z.string(), value_type: z.string(), valid_operators: z.array(z.string()), enum_values: z.array(z.string()).optional() }),
    ),
    operators: z.array(z.object({ name: z.string(), description: z.string(), arity: z.number().int(), value_shape: z.string() })),
  })
  .openapi('PolicySchema');

export const ApproverCandidateObject = z
  .object({
    id: z.string(),
    object: z.literal('approver_candidate'),
    type: z.enum(['user', 'role']),
    name: z.string(),
    org_role: z.string().optional(),
    votes_on_your_activations: z
      .boolean()
      .optional()
      .openapi({ description: "A member: whether it may vote on the caller's activation requests (an owner, admin or approver whose provenance shares nothing with the caller's: not the caller, nor a member the caller's keys added: docs/policies.md, \"Keys and people\")" }),
    member_count: z.number().int().optional(),
  })
  .openapi('ApproverCandidate');

const DiagnosticObject = z.object({
  code: z.string(),
  message: z.string(),
  severity: z.enum(['error', 'warning', 'info']),
  rule_id: z.string().nullable(),
  rule_index: z.number().int().nullable(),
  suggested_fix: z.string(),
});

export const ValidationResultObject = z
  .object({
    object: z.literal('policy_validation'),
    valid: z.boolean(),
    issue_count: z.object({ error: z.number().int(), warning: z.number().int(), info: z.number().int() }),
    diagnostics: z.array(DiagnosticObject),
  })
  .openapi('PolicyValidationResult');

const TraceEntryObject = z.object({
  policy_id: z.string(),
  rule_id: z.string(),
  rule_index: z.number().int(),
  rule_name: z.string(),
  matched: z.boolean(),
  terminal: z.boolean(),
  action: z.enum(ACTION_TYPES),
  reason: z.string(),
  note: z.string().nullable(),
  failed_condition: z.object({ field: z.string(), operator: z.string(), expected: z.string(), actual: z.string() }).nullable(),
});

export const EvaluationResultObject = z
  .object({
    object: z.literal('policy_evaluation'),
    allowed: z.boolean(),
    result: z.enum(EVALUATION_RESULTS),
    policy_id: z.string().nullable(),
    rule_id: z.string().nullable(),
    reason: z.string(),
    requires_approval: z.boolean(),
    required_approvals: z.number().int().nullable(),
    expiry_hours: z.number().int().nullable(),
    delay_minutes: z.number().int().nullable(),
    price_unavailable: z.literal(true).optional().openapi({ description: 'Present when the deciding rule matched only because a USD value was unknown or stale (prices fail closed)' }),
    trace: z.array(TraceEntryObject).optional().openapi({ description: 'Omitted on no_match and quorum' }),
  })
  .openapi('PolicyEvaluationResult');

const SimulationExample = z.object({ index: z.number().int(), result: z.enum(EVALUATION_RESULTS), rule_id: z.string().nullable(), reason: z.string() });
export const SimulationObject = z
  .object({
    object: z.literal('policy_simulation'),
    policy_id: z.string(),
    total: z.number().int(),
    allowed: z.number().int(),
    blocked: z.number().int(),
    held_for_approval: z.number().int(),
    delayed: z.number().int(),
    changed_from_current: z.number().int().openapi({ description: 'Requests whose decision differs from the policies enforced now' }),
    examples: z.object({
      allowed: z.array(SimulationExample),
      blocked: z.array(SimulationExample),
      held_for_approval: z.array(SimulationExample),
      delayed: z.array(SimulationExample),
    }),
  })
  .openapi('PolicySimulation');

const OutcomeCounts = z.object({ allowed: z.number().int(), blocked: z.number().int(), held_for_approval: z.number().int(), delayed: z.number().int() });
const Outcome = z.enum(OUTCOMES);
const HistoryExample = z.object({
  source: z.enum(['transaction', 'refused_request']),
  transaction_id: z.string().nullable(),
  audit_log_id: z.string().nullable().openapi({ description: 'The decision entry of a refused request' }),
  created_at: Timestamp,
  wallet_id: z.string().nullable(),
  status: z.enum(TRANSACTION_STATUSES).nullable().openapi({ description: "The transaction's status; null for a refused request" }),
  asset_id: z.string().nullable(),
  asset_symbol: z.string().nullable(),
  amount: z.string().nullable(),
  amount_raw: z.string().nullable(),
  amount_usd: z.string().nullable(),
  to_address: z.string().nullable(),
  actual: z.object({ outcome: Outcome, result: z.string(), policy_id: z.string().nullable(), rule_id: z.string().nullable() }),
  draft: z.object({ outcome: Outcome, result: z.enum(EVALUATION_RESULTS), policy_id: z.string().nullable(), rule_id: z.string().nullable(), rule_name: z.string().nullable(), reason: z.string() }),
  changed: z.boolean().openapi({ description: 'The draft outcome differs from what happened' }),
  velocity: z
    .object({ velocity_amount_usd_24h: z.string(), velocity_amount_usd_1h: z.string(), velocity_count_24h: z.string(), velocity_count_1h: z.string() })
    .openapi({ description: 'The velocity fields as the draft would have seen them' }),
});
export const HistorySimulationObject = z
  .object({
    object: z.literal('policy_history_simulation'),
    policy_id: z.string(),
    window: z.object({ from: Timestamp, to: Timestamp, wallet_id: z.string().nullable(), include_refused: z.boolean() }),
    total: z.number().int(),
    transactions: z.number().int(),
    refused_requests: z.number().int(),
    allowed: z.number().int().openapi({ description: 'Under the draft' }),
    blocked: z.number().int(),
    held_for_approval: z.number().int(),
    delayed: z.number().int(),
    actual: OutcomeCounts.openapi({ description: 'What happened' }),
    transitions: z
      .object({ allowed: OutcomeCounts, blocked: OutcomeCounts, held_for_approval: OutcomeCounts, delayed: OutcomeCounts })
      .openapi({ description: 'transitions[actual][draft]: how many requests that actually had one outcome get another under the draft' }),
    changed: z.number().int().openapi({ description: 'Requests whose draft outcome differs from what happened' }),
    changed_from_current: z.number().int().openapi({ description: 'Requests whose draft outcome differs from the policies enforced now, replayed the same way' }),
    usd: z.object({
      stopped: z.string().openapi({ description: 'USD value of sends that went out (not failed) and the draft would have refused' }),
      released: z.string().openapi({ description: 'USD value of refused requests the draft would have allowed' }),
      unpriced_changes: z.number().int().openapi({ description: 'Such changes with no USD value (not in the sums)' }),
    }),
    examples: z
      .object({ allowed: z.array(HistoryExample), blocked: z.array(HistoryExample), held_for_approval: z.array(HistoryExample), delayed: z.array(HistoryExample) })
      .openapi({ description: 'Per draft outcome, up to example_limit: changed requests first, in time order, then unchanged ones' }),
  })
  .openapi('PolicyHistorySimulation');

export const AuditLogObject = z
  .object({
    id: z.string(),
    object: z.literal('policy_audit_log'),
    policy_id: z.string().nullable(),
    action: z.string(),
    actor_id: z.string(),
    actor_name: z.string(),
    changes: z.record(z.string(), z.unknown()),
    metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
  })
  .openapi('PolicyAuditLog');
