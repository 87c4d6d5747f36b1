import { compare, toDecimal, type PlainDecimal } from './decimals';
import {
  DESTINATION_FIELDS,
  FIELD_BY_NAME,
  OPERATOR_SHAPE,
  USD_FIELDS,
  VALUE_FIELDS,
  isAddressBookOperator,
  type ActionType,
  type Condition,
  type OperatorName,
  type ScalarValue,
} from './schema';

/**
 * The policy evaluator: pure, no I/O. Sending calls it (through `decideTransaction`) before every
 * transaction; the dry run, simulate and the property tests call it directly.
 *
 * Order: policies by ascending priority (ties keep the caller's order: oldest first), rules by
 * ascending order; the first rule whose conditions all hold decides. A field absent from the
 * request makes every condition on it fail (the spec: empty actor_type never matches).
 *
 * Prices fail closed: when the request says `price_unavailable` (its USD value is unknown or stale),
 * a condition on an absent USD field holds for a block, require_approval or delay rule (the value
 * could be above any threshold) and fails for an allow or alert rule, so "approval above 10,000 USD"
 * followed by a catch-all holds a movement of unknown value instead of letting it through. So do
 * a movement's other unknowns (a signature whose payload does not say them): absent value fields
 * (amount, amount_raw, asset_symbol) when the request says `price_unavailable`, absent destination
 * fields (to_address, spender) when it says `destination_type` unknown. A catch-all
 * `amount >= 0 -> block` thus blocks a signature of unknown value.
 */

export interface EvaluationRequest {
  readonly [field: string]: string | boolean | number | undefined;
  /** Approvals already collected for this transaction (sending supplies it; a dry run may). */
  approval_count?: number;
}

/**
 * What the evaluator cannot read from the request itself. `addressBookEntryIds`: the ids of the
 * environment's address-book entries listing the request's to_address on its chain (looked up by
 * the caller); absent, address-book conditions do not hold.
 */
export interface EvaluationContext {
  addressBookEntryIds?: readonly string[];
  /**
   * Only a rule that names the request's operation_type (an `equal` or `in` condition on it) may let
   * it through: other allow and alert rules do not match, and with no enforced policy it is refused.
   * Raw signing in live (custody/signing.ts): bytes the service cannot read go only where a rule says so.
   */
  namedAllowRequired?: boolean;
}

/** A request field as a condition sees it (numbers as their decimal text). */
const fieldValue = (request: EvaluationRequest, field: string): string | boolean | undefined => {
  const value = request[field];
  return typeof value === 'number' ? String(value) : value;
};

export interface EvaluableRule {
  id: string;
  name: string;
  order: number;
  actionType: ActionType;
  actionConfig: Record<string, unknown>;
  conditions: Condition[];
}

export interface EvaluablePolicy {
  id: string;
  category: string;
  priority: number;
  rules: EvaluableRule[];
}

export const EVALUATION_RESULTS = ['matched_rule', 'quorum', 'no_match', 'approved', 'rejected', 'awaiting_approval', 'delayed'] as const;
export type EvaluationResultValue = (typeof EVALUATION_RESULTS)[number];

export interface FailedCondition {
  field: string;
  operator: string;
  expected: string;
  actual: string;
}

export interface TraceEntry {
  policy_id: string;
  rule_id: string;
  rule_index: number;
  rule_name: string;
  matched: boolean;
  terminal: boolean;
  action: ActionType;
  reason: string;
  note: string | null;
  failed_condition: FailedCondition | null;
}

export interface EvaluationResult {
  object: 'policy_evaluation';
  allowed: boolean;
  result: EvaluationResultValue;
  policy_id: string | null;
  rule_id: string | null;
  reason: string;
  requires_approval: boolean;
  required_approvals: number | null;
  expiry_hours: number | null;
  delay_minutes: number | null;
  /** True when the deciding rule matched only because a USD value was unknown (fail closed); absent otherwise. */
  price_unavailable?: true;
  trace?: TraceEntry[];
}

export const OUTCOMES = ['allowed', 'blocked', 'held_for_approval', 'delayed'] as const;
/** What a decision does to a send: it goes, it is refused (block or default deny), it waits for approvals, or it waits out a delay. */
export type Outcome = (typeof OUTCOMES)[number];
export const outcomeOf = (evaluation: Pick<EvaluationResult, 'allowed' | 'result' | 'requires_approval'>): Outcome =>
  evaluation.allowed ? 'allowed' : evaluation.result === 'delayed' ? 'delayed' : evaluation.requires_approval ? 'held_for_approval' : 'blocked';

function toBoolean(value: unknown): boolean | null {
  if (typeof value === 'boolean') return value;
  if (value === 'true' || value === 'false') return value === 'true';
  return null;
}

/** Equality of the actual value and an operand under the field's value type (`decimal`: the actual value of a decimal field, parsed once). */
function same(valueType: string, actual: unknown, decimal: PlainDecimal | null, operand: unknown): boolean {
  if (valueType === 'decimal') {
    const y = toDecimal(operand);
    return decimal !== null && y !== null && compare(decimal, y) === 0;
  }
  if (valueType === 'boolean') {
    const x = toBoolean(actual);
    return x !== null && x === toBoolean(operand);
  }
  return String(actual) === String(operand);
}

/** True when the condition holds for `actual`; unknown fields, absent values and bad operands fail. */
export function conditionHolds(condition: Condition, actual: string | boolean | undefined, context: EvaluationContext = {}): boolean {
  const spec = FIELD_BY_NAME.get(condition.field);
  if (!spec || actual === undefined || actual === '') return false;
  if (!spec.valid_operators.includes(condition.operator as OperatorName)) return false;
  const type = spec.value_type;
  // An actual value of the wrong type meets no condition, not even a negative one.
  const decimal = type === 'decimal' ? toDecimal(actual) : null;
  if (type === 'decimal' && decimal === null) return false;
  if (type === 'boolean' && toBoolean(actual) === null) return false;
  if (type === 'enum' && !spec.enum_values?.includes(String(actual))) return false;
  switch (condition.operator as OperatorName) {
    case 'equal':
      return condition.value !== undefined && same(type, actual, decimal, condition.value);
    case 'not_equal':
      return condition.value !== undefined && !same(type, actual, decimal, condition.value);
    case 'in':
      return !!condition.values?.length && condition.values.some((v) => same(type, actual, decimal, v));
    case 'not_in':
      return !!condition.values?.length && !condition.values.some((v) => same(type, actual, decimal, v));
    case 'contains':
      return typeof condition.value === 'string' && String(actual).includes(condition.value);
    case 'in_address_book':
    case 'not_in_address_book': {
      const listed = context.addressBookEntryIds;
      if (!listed) return false;
      const named = condition.values ?? [];
      const inBook = named.length === 0 ? listed.length > 0 : listed.some((id) => named.includes(id));
      return condition.operator === 'in_address_book' ? inBook : !inBook;
    }
    default:
      return decimal !== null && compareDecimal(condition, decimal);
  }
}

function compareDecimal(condition: Condition, x: PlainDecimal): boolean {
  const operator = condition.operator as OperatorName;
  if (operator === 'between' || operator === 'not_between') {
    const [min, max] = [toDecimal(condition.min), toDecimal(condition.max)];
    if (min === null || max === null) return false;
    const inside = compare(x, min) >= 0 && compare(x, max) <= 0;
    return operator === 'between' ? inside : !inside;
  }
  const y = toDecimal(condition.value);
  if (y === null) return false;
  switch (operator) {
    case 'greater_than':
      return compare(x, y) > 0;
    case 'less_than':
      return compare(x, y) < 0;
    case 'greater_than_or_equal':
      return compare(x, y) >= 0;
    case 'less_than_or_equal':
      return compare(x, y) <= 0;
    default:
      return false;
  }
}

export function describeExpected(condition: Condition): string {
  const shape = OPERATOR_SHAPE[condition.operator as OperatorName];
  if (isAddressBookOperator(condition.operator) && !condition.values?.length) return 'any address-book entry of the chain';
  if (shape === 'array') return (condition.values ?? []).map(String).join(',');
  if (shape === 'range') return `${String(condition.min ?? '')}..${String(condition.max ?? '')}`;
  return condition.value === undefined ? '' : String(condition.value as ScalarValue);
}

/** Orders policies for evaluation; stable, so equal priorities keep the caller's order. */
export function inEvaluationOrder<T extends { priority: number }>(policies: readonly T[]): T[] {
  return [...policies].sort((a, b) => a.priority - b.priority);
}

/** Rules by ascending order (stable); as loaded they already are, and then nothing is copied. */
function inRuleOrder(rules: EvaluableRule[]): EvaluableRule[] {
  for (let i = 1; i < rules.length; i++) {
    if (rules[i - 1]!.order > rules[i]!.order) return [...rules].sort((a, b) => a.order - b.order);
  }
  return rules;
}

/** Rules whose action restrains a movement: an unknown USD value is taken to meet their USD conditions. */
const RESTRAINING: ReadonlySet<ActionType> = new Set(['block', 'require_approval', 'delay']);

/** Why a restraining rule took an absent field to meet its condition: its value unknown, or its destination. */
type Assumption = 'price' | 'destination';

/** The unknown the rule takes to meet its condition (fail closed), or null when the condition is judged on the value. */
function assumedUnknown(condition: Condition, request: EvaluationRequest, restraining: boolean): Assumption | null {
  const absent = request[condition.field] === undefined || request[condition.field] === '';
  if (!restraining || !absent) return null;
  if (request.price_unavailable === true && (USD_FIELDS.has(condition.field) || VALUE_FIELDS.has(condition.field))) return 'price';
  if (request.destination_type === 'unknown' && DESTINATION_FIELDS.has(condition.field)) return 'destination';
  return null;
}

/** Whether the rule names `operationType` in an equal or in condition on operation_type. */
const namesOperation = (rule: EvaluableRule, operationType: unknown): boolean =>
  rule.conditions.some(
    (c) => c.field === 'operation_type' && ((c.operator === 'equal' && c.value === operationType) || (c.operator === 'in' && !!c.values?.includes(operationType as ScalarValue))),
  );

/** The first condition that does not hold, and the unknowns taken to hold. */
function firstFailedCondition(
  rule: EvaluableRule,
  request: EvaluationRequest,
  context: EvaluationContext,
): { failed: Condition | undefined; assumed: Set<Assumption>; reason?: string } {
  const restraining = RESTRAINING.has(rule.actionType);
  const assumed = new Set<Assumption>();
  if (!restraining && context.namedAllowRequired && !namesOperation(rule, request.operation_type)) {
    // The implicit condition such a request adds to every rule that would let it through.
    const operationType = String(request.operation_type);
    return { failed: { field: 'operation_type', operator: 'equal', value: operationType }, assumed, reason: `the rule does not name operation_type ${operationType}, which only a rule naming it may let through` };
  }
  for (const condition of rule.conditions) {
    const assumption = assumedUnknown(condition, request, restraining);
    if (assumption) {
      assumed.add(assumption);
      continue;
    }
    if (!conditionHolds(condition, fieldValue(request, condition.field), context)) return { failed: condition, assumed };
  }
  return { failed: undefined, assumed };
}

const numberOrNull = (value: unknown): number | null => (typeof value === 'number' ? value : null);

const ASSUMPTION_NOTES: Record<Assumption, string> = {
  price: 'price_unavailable: a condition on the value was taken to hold, since the USD value or the amount is unknown or stale',
  destination: 'destination_type unknown: a condition on the destination was taken to hold, since it is unknown',
};
const ASSUMPTION_REASONS: Record<Assumption, string> = {
  price: 'price_unavailable: the value is unknown, so its condition is taken to hold',
  destination: 'the destination is unknown, so its condition is taken to hold',
};

export function evaluatePolicies(policies: readonly EvaluablePolicy[], request: EvaluationRequest, context: EvaluationContext = {}): EvaluationResult {
  const trace: TraceEntry[] = [];
  for (const policy of inEvaluationOrder(policies)) {
    const rules = inRuleOrder(policy.rules);
    for (let index = 0; index < rules.length; index++) {
      const rule = rules[index]!;
      const { failed, assumed, reason } = firstFailedCondition(rule, request, context);
      const entry: TraceEntry = {
        policy_id: policy.id,
        rule_id: rule.id,
        rule_index: index,
        rule_name: rule.name,
        matched: !failed,
        terminal: !failed,
        action: rule.actionType,
        reason: reason ?? (failed ? `condition on ${failed.field} did not hold` : `all ${rule.conditions.length} condition(s) held`),
        note: !failed && assumed.size > 0 ? [...assumed].map((a) => ASSUMPTION_NOTES[a]).join('; ') : rule.conditions.length === 0 ? 'rule has no conditions: it matches every request' : null,
        failed_condition: failed
          ? {
              field: failed.field,
              operator: failed.operator,
              expected: describeExpected(failed),
              actual: String(fieldValue(request, failed.field) ?? ''),
            }
          : null,
      };
      trace.push(entry);
      if (!failed) {
        const result = decide(policy, rule, request, trace);
        if (assumed.size === 0) return result;
        const reason = `${result.reason} (${[...assumed].map((a) => ASSUMPTION_REASONS[a]).join('; ')})`;
        return assumed.has('price') ? { ...result, price_unavailable: true, reason } : { ...result, reason };
      }
    }
  }
  const anyPolicy = policies.length > 0;
  return {
    object: 'policy_evaluation',
    // Default deny once any policy is enforced (as Fireblocks' TAP); nothing enforced: nothing to refuse.
    allowed: !anyPolicy && !context.namedAllowRequired,
    result: 'no_match',
    policy_id: null,
    rule_id: null,
    reason: context.namedAllowRequired
      ? `No enforced rule lets operation_type ${String(request.operation_type)} through by name, which it needs: refused`
      : anyPolicy
        ? 'No rule matched: denied by default'
        : 'No enforced policy: allowed',
    requires_approval: false,
    required_approvals: null,
    expiry_hours: null,
    delay_minutes: null,
  };
}

/** What a matched rule holds the transaction for (nothing, approvals or a delay). */
interface Hold {
  requires_approval: boolean;
  required_approvals: number | null;
  expiry_hours: number | null;
  delay_minutes: number | null;
}
const NO_HOLD: Hold = { requires_approval: false, required_approvals: null, expiry_hours: null, delay_minutes: null };

function decide(policy: EvaluablePolicy, rule: EvaluableRule, request: EvaluationRequest, trace: TraceEntry[]): EvaluationResult {
  const config = rule.actionConfig;
  switch (rule.actionType) {
    case 'allow':
      return decision(policy, rule, NO_HOLD, trace, true, 'matched_rule', `Allowed by rule '${rule.name}'`);
    case 'alert':
      return decision(policy, rule, NO_HOLD, trace, true, 'matched_rule', `Allowed with an alert by rule '${rule.name}'`);
    case 'block':
      return decision(policy, rule, NO_HOLD, trace, false, 'rejected', typeof config.reason === 'string' ? config.reason : `Blocked by rule '${rule.name}'`);
    case 'delay':
      return decision(policy, rule, { requires_approval: false, required_approvals: null, expiry_hours: null, delay_minutes: numberOrNull(config.delay_minutes) }, trace, false, 'delayed', `Delayed by rule '${rule.name}'`);
    case 'require_approval': {
      const required = numberOrNull(config.required_approvals) ?? 1;
      const hold: Hold = { requires_approval: true, required_approvals: required, expiry_hours: numberOrNull(config.expiry_hours) ?? 24, delay_minutes: null };
      if ((request.approval_count ?? 0) >= required) {
        return decision(policy, rule, hold, trace, true, 'approved', `${required} approval(s) collected for rule '${rule.name}'`);
      }
      if (policy.category === 'quorum') {
        // The spec omits the trace on quorum paths.
        return decision(policy, rule, hold, null, false, 'quorum', `Quorum of ${required} required by rule '${rule.name}'`);
      }
      return decision(policy, rule, hold, trace, false, 'awaiting_approval', `${required} approval(s) required by rule '${rule.name}'`);
    }
  }
}

/**
 * A matched rule's result, written out in full: built by object spreads it cost more than scanning
 * 50 rules (Node 20 copies a spread object literal through a slow runtime path, about 3 µs a time).
 */
function decision(
  policy: EvaluablePolicy,
  rule: EvaluableRule,
  hold: Hold,
  trace: TraceEntry[] | null,
  allowed: boolean,
  result: EvaluationResultValue,
  reason: string,
): EvaluationResult {
  const { requires_approval, required_approvals, expiry_hours, delay_minutes } = hold;
  const { id: policy_id } = policy;
  const { id: rule_id } = rule;
  if (trace === null) return { object: 'policy_evaluation', policy_id, rule_id, requires_approval, required_approvals, expiry_hours, delay_minutes, allowed, result, reason };
  return { object: 'policy_evaluation', policy_id, rule_id, requires_approval, required_approvals, expiry_hours, delay_minutes, trace, allowed, result, reason };
}
