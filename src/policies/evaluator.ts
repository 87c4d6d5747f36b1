import { Money, type MoneyValue } from '../shared/money';
import { FIELD_BY_NAME, OPERATOR_SHAPE, isAddressBookOperator, type ActionType, type Condition, type OperatorName, type ScalarValue } from './schema';

/**
 * The policy evaluator: pure, no I/O. Sending calls it (through `decideTransaction`) before every
 * transaction; the dry run, simulate and the property tests call it directly.
 *
 * Order: policies by ascending priority (ties keep the caller's order: oldest first), rules by
 * ascending order; the first rule whose conditions all hold decides. A field absent from the
 * request makes every condition on it fail (the spec: empty actor_type never matches).
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
  trace?: TraceEntry[];
}

export const OUTCOMES = ['allowed', 'blocked', 'held_for_approval', 'delayed'] as const;
/** What a decision does to a send: it goes, it is refused (block or default deny), it waits for approvals, or it waits out a delay. */
export type Outcome = (typeof OUTCOMES)[number];
export const outcomeOf = (evaluation: Pick<EvaluationResult, 'allowed' | 'result' | 'requires_approval'>): Outcome =>
  evaluation.allowed ? 'allowed' : evaluation.result === 'delayed' ? 'delayed' : evaluation.requires_approval ? 'held_for_approval' : 'blocked';

function toDecimal(value: unknown): MoneyValue | null {
  if (typeof value === 'number' && Number.isFinite(value)) return new Money(String(value));
  if (typeof value === 'string' && /^-?(\d+)(\.\d+)?$/.test(value.trim())) return new Money(value.trim());
  return null;
}

function toBoolean(value: unknown): boolean | null {
  if (typeof value === 'boolean') return value;
  if (value === 'true' || value === 'false') return value === 'true';
  return null;
}

/** Equality of two operands under the field's value type. */
function same(valueType: string, a: unknown, b: unknown): boolean {
  if (valueType === 'decimal') {
    const [x, y] = [toDecimal(a), toDecimal(b)];
    return x !== null && y !== null && x.equals(y);
  }
  if (valueType === 'boolean') {
    const [x, y] = [toBoolean(a), toBoolean(b)];
    return x !== null && x === y;
  }
  return String(a) === String(b);
}

/** True when the condition holds for `actual`; unknown fields, absent values and bad operands fail. */
export function conditionHolds(condition: Condition, actual: string | boolean | undefined, context: EvaluationContext = {}): boolean {
  const spec = FIELD_BY_NAME.get(condition.field);
  if (!spec || actual === undefined || actual === '') return false;
  if (!spec.valid_operators.includes(condition.operator as OperatorName)) return false;
  const type = spec.value_type;
  // An actual value of the wrong type meets no condition, not even a negative one.
  if (type === 'decimal' && toDecimal(actual) === null) return false;
  if (type === 'boolean' && toBoolean(actual) === null) return false;
  if (type === 'enum' && !spec.enum_values?.includes(String(actual))) return false;
  switch (condition.operator as OperatorName) {
    case 'equal':
      return condition.value !== undefined && same(type, actual, condition.value);
    case 'not_equal':
      return condition.value !== undefined && !same(type, actual, condition.value);
    case 'in':
      return !!condition.values?.length && condition.values.some((v) => same(type, actual, v));
    case 'not_in':
      return !!condition.values?.length && !condition.values.some((v) => same(type, actual, v));
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
      return compareDecimal(condition, actual);
  }
}

function compareDecimal(condition: Condition, actual: string | boolean): boolean {
  const x = toDecimal(actual);
  if (x === null) return false;
  const operator = condition.operator as OperatorName;
  if (operator === 'between' || operator === 'not_between') {
    const [min, max] = [toDecimal(condition.min), toDecimal(condition.max)];
    if (min === null || max === null) return false;
    const inside = x.gte(min) && x.lte(max);
    return operator === 'between' ? inside : !inside;
  }
  const y = toDecimal(condition.value);
  if (y === null) return false;
  switch (operator) {
    case 'greater_than':
      return x.gt(y);
    case 'less_than':
      return x.lt(y);
    case 'greater_than_or_equal':
      return x.gte(y);
    case 'less_than_or_equal':
      return x.lte(y);
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

const numberOrNull = (value: unknown): number | null => (typeof value === 'number' ? value : null);

export function evaluatePolicies(policies: readonly EvaluablePolicy[], request: EvaluationRequest, context: EvaluationContext = {}): EvaluationResult {
  const trace: TraceEntry[] = [];
  for (const policy of inEvaluationOrder(policies)) {
    const rules = [...policy.rules].sort((a, b) => a.order - b.order);
    for (const [index, rule] of rules.entries()) {
      const failed = rule.conditions.find((condition) => !conditionHolds(condition, fieldValue(request, condition.field), context));
      const entry: TraceEntry = {
        policy_id: policy.id,
        rule_id: rule.id,
        rule_index: index,
        rule_name: rule.name,
        matched: !failed,
        terminal: !failed,
        action: rule.actionType,
        reason: failed ? `condition on ${failed.field} did not hold` : `all ${rule.conditions.length} condition(s) held`,
        note: rule.conditions.length === 0 ? 'rule has no conditions: it matches every request' : null,
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
      if (!failed) return decide(policy, rule, request, trace);
    }
  }
  const anyPolicy = policies.length > 0;
  return {
    object: 'policy_evaluation',
    // Default deny once any policy is enforced (as Fireblocks' TAP); nothing enforced: nothing to refuse.
    allowed: !anyPolicy,
    result: 'no_match',
    policy_id: null,
    rule_id: null,
    reason: anyPolicy ? 'No rule matched: denied by default' : 'No enforced policy: allowed',
    requires_approval: false,
    required_approvals: null,
    expiry_hours: null,
    delay_minutes: null,
  };
}

function decide(policy: EvaluablePolicy, rule: EvaluableRule, request: EvaluationRequest, trace: TraceEntry[]): EvaluationResult {
  const base = {
    object: 'policy_evaluation' as const,
    policy_id: policy.id,
    rule_id: rule.id,
    requires_approval: false,
    required_approvals: null,
    expiry_hours: null,
    delay_minutes: null,
    trace,
  };
  const config = rule.actionConfig;
  switch (rule.actionType) {
    case 'allow':
      return { ...base, allowed: true, result: 'matched_rule', reason: `Allowed by rule '${rule.name}'` };
    case 'alert':
      return { ...base, allowed: true, result: 'matched_rule', reason: `Allowed with an alert by rule '${rule.name}'` };
    case 'block':
      return { ...base, allowed: false, result: 'rejected', reason: typeof config.reason === 'string' ? config.reason : `Blocked by rule '${rule.name}'` };
    case 'delay':
      return { ...base, allowed: false, result: 'delayed', reason: `Delayed by rule '${rule.name}'`, delay_minutes: numberOrNull(config.delay_minutes) };
    case 'require_approval': {
      const required = numberOrNull(config.required_approvals) ?? 1;
      const approval = { ...base, requires_approval: true, required_approvals: required, expiry_hours: numberOrNull(config.expiry_hours) ?? 24 };
      if ((request.approval_count ?? 0) >= required) {
        return { ...approval, allowed: true, result: 'approved', reason: `${required} approval(s) collected for rule '${rule.name}'` };
      }
      if (policy.category === 'quorum') {
        // The spec omits the trace on quorum paths.
        const { trace: _trace, ...quorum } = approval;
        return { ...quorum, allowed: false, result: 'quorum', reason: `Quorum of ${required} required by rule '${rule.name}'` };
      }
      return { ...approval, allowed: false, result: 'awaiting_approval', reason: `${required} approval(s) required by rule '${rule.name}'` };
    }
  }
}
