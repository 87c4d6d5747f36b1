import { Money, type MoneyValue } from '../shared/money';
import { conditionHolds } from './evaluator';
import { ACTION_CONFIG_SCHEMAS, FIELD_BY_NAME, OPERATOR_SHAPE, isAddressBookOperator, type ActionType, type Condition, type ConditionFieldSpec, type OperatorName } from './schema';
import { withArticle } from '../shared/articles';
import { describeIssue, namedIssueMessage } from '../shared/validation-messages';

/**
 * Policy diagnostics (spec rule 10: findings are diagnostics, never errors). Pure, no I/O: the
 * caller passes the organization's approver directory. Every "unreachable" and "contradictory"
 * finding is sound: a rule reported unreachable can never be the first match (property-tested).
 */

export type Severity = 'error' | 'warning' | 'info';

export interface Diagnostic {
  code: string;
  message: string;
  severity: Severity;
  rule_id: string | null;
  rule_index: number | null;
  suggested_fix: string;
}

export interface ValidationResult {
  object: 'policy_validation';
  valid: boolean;
  issue_count: Record<Severity, number>;
  diagnostics: Diagnostic[];
}

export interface DraftRule {
  id?: string | null;
  name?: string;
  action_type: ActionType;
  action_config?: unknown;
  conditions?: Condition[];
}

export interface ValidationContext {
  /** Approver id (member or role) -> the member ids it stands for. */
  approvers: ReadonlyMap<string, readonly string[]>;
}

interface Interval {
  lo: MoneyValue | null;
  loOpen: boolean;
  hi: MoneyValue | null;
  hiOpen: boolean;
}

const decimal = (value: unknown): MoneyValue | null => {
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : '';
  return /^-?\d+(\.\d+)?$/.test(text) ? new Money(text) : null;
};

function operandsOf(condition: Condition): unknown[] {
  const shape = OPERATOR_SHAPE[condition.operator as OperatorName];
  if (shape === 'array') return condition.values ?? [];
  if (shape === 'range') return [condition.min, condition.max];
  return [condition.value];
}

function operandFits(spec: ConditionFieldSpec, operator: string, value: unknown): boolean {
  switch (spec.value_type) {
    case 'decimal':
      return decimal(value) !== null;
    case 'boolean':
      return typeof value === 'boolean' || value === 'true' || value === 'false';
    case 'enum':
      return typeof value === 'string' && (spec.enum_values ?? []).includes(value);
    case 'string':
      return typeof value === 'string' && (operator !== 'contains' || value.length > 0);
  }
}

/** The interval a decimal condition confines the field to, or null when it is not one interval. */
function intervalOf(condition: Condition): Interval | null {
  const v = decimal(condition.value);
  switch (condition.operator) {
    case 'equal':
      return v && { lo: v, loOpen: false, hi: v, hiOpen: false };
    case 'greater_than':
      return v && { lo: v, loOpen: true, hi: null, hiOpen: false };
    case 'greater_than_or_equal':
      return v && { lo: v, loOpen: false, hi: null, hiOpen: false };
    case 'less_than':
      return v && { lo: null, loOpen: false, hi: v, hiOpen: true };
    case 'less_than_or_equal':
      return v && { lo: null, loOpen: false, hi: v, hiOpen: false };
    case 'between': {
      const [min, max] = [decimal(condition.min), decimal(condition.max)];
      return min && max ? { lo: min, loOpen: false, hi: max, hiOpen: false } : null;
    }
    default:
      return null;
  }
}

function intersect(a: Interval, b: Interval): Interval {
  let { lo, loOpen, hi, hiOpen } = a;
  if (b.lo && (!lo || b.lo.gt(lo) || (b.lo.eq(lo) && b.loOpen))) [lo, loOpen] = [b.lo, b.loOpen];
  if (b.hi && (!hi || b.hi.lt(hi) || (b.hi.eq(hi) && b.hiOpen))) [hi, hiOpen] = [b.hi, b.hiOpen];
  return { lo, loOpen, hi, hiOpen };
}

const isEmpty = (i: Interval): boolean => !!i.lo && !!i.hi && (i.lo.gt(i.hi) || (i.lo.eq(i.hi) && (i.loOpen || i.hiOpen)));

/** a ⊆ b */
function within(a: Interval, b: Interval): boolean {
  const loOk = !b.lo || (!!a.lo && (a.lo.gt(b.lo) || (a.lo.eq(b.lo) && (!b.loOpen || a.loOpen))));
  const hiOk = !b.hi || (!!a.hi && (a.hi.lt(b.hi) || (a.hi.eq(b.hi) && (!b.hiOpen || a.hiOpen))));
  return loOk && hiOk;
}

/** The finite set of values a condition admits, when it admits only finitely many. */
function finiteValues(condition: Condition, spec: ConditionFieldSpec): unknown[] | null {
  if (condition.operator === 'equal') return [condition.value];
  if (condition.operator === 'in') return condition.values ?? [];
  if (spec.value_type === 'boolean') return [true, false];
  if (spec.value_type === 'enum') return [...(spec.enum_values ?? [])];
  return null;
}

/** Values a condition rules out (not_equal, not_in). */
function excludedValues(condition: Condition): unknown[] | null {
  if (condition.operator === 'not_equal') return [condition.value];
  if (condition.operator === 'not_in') return condition.values ?? [];
  return null;
}

const holds = (condition: Condition, value: unknown): boolean => conditionHolds(condition, typeof value === 'boolean' ? value : String(value));

/** True when every request meeting `a` meets `b` (same field; both well-formed). Sound, not complete. */
function implies(a: Condition, b: Condition, spec: ConditionFieldSpec): boolean {
  const finite = a.operator === 'equal' || a.operator === 'in' ? finiteValues(a, spec) : null;
  if (finite) return finite.length > 0 && finite.every((value) => holds(b, value));
  if (spec.value_type === 'decimal') {
    const [ia, ib] = [intervalOf(a), intervalOf(b)];
    if (ia && ib) return within(ia, ib);
  }
  const [xa, xb] = [excludedValues(a), excludedValues(b)];
  if (xa && xb) return xb.every((value) => xa.some((excluded) => holds({ ...b, operator: 'equal', value: excluded as never }, value)));
  if (a.operator === 'contains' && b.operator === 'contains') return String(a.value).includes(String(b.value));
  return JSON.stringify(a) === JSON.stringify(b);
}

/** True when no request can meet all these conditions on one field. Address-book conditions depend on the book, not on the value: left out. */
function contradictory(group: Condition[], spec: ConditionFieldSpec): boolean {
  const conditions = group.filter((condition) => !isAddressBookOperator(condition.operator));
  if (spec.value_type === 'decimal') {
    const intervals = conditions.map(intervalOf).filter((i): i is Interval => i !== null);
    if (intervals.length > 1 && isEmpty(intervals.reduce(intersect))) return true;
  }
  const finite = conditions.map((c) => finiteValues(c, spec)).find((values) => values !== null);
  return !!finite && !finite.some((value) => conditions.every((c) => holds(c, value)));
}

export function validatePolicyRules(rules: readonly DraftRule[], context: ValidationContext): ValidationResult {
  const diagnostics: Diagnostic[] = [];
  const add = (code: string, severity: Severity, index: number | null, message: string, suggested_fix: string) =>
    diagnostics.push({ code, message, severity, rule_id: index === null ? null : (rules[index]?.id ?? null), rule_index: index, suggested_fix });
  // An empty policy and a rule without conditions are errors wherever they are found: activation refuses
  // them (the spec: conditions are optional on a draft, required when activating), so validating a
  // draft predicts that refusal with the same severity.
  if (rules.length === 0) {
    add('empty_policy', 'error', null, 'The policy has no rules.', 'Add at least one rule.');
  }

  /** Per rule: its well-formed conditions, or null when one is malformed (the rule can never match). */
  const wellFormed: (Condition[] | null)[] = [];
  const seenNames = new Map<string, number>();

  rules.forEach((rule, index) => {
    const conditions = rule.conditions ?? [];
    let malformed = false;
    if (conditions.length === 0) {
      add('empty_conditions', 'error', index, 'The rule has no conditions, so it matches every request.',
        'Add a condition; a deliberate catch-all can test e.g. amount greater_than_or_equal 0.');
    }
    conditions.forEach((condition, position) => {
      const where = `Condition ${position + 1}`;
      const spec = FIELD_BY_NAME.get(condition.field);
      if (!spec) {
        malformed = true;
        return add('invalid_field', 'error', index, `${where}: '${condition.field}' is not a condition field.`, 'Use a field listed by GET /v1/policies/schema.');
      }
      if (!spec.valid_operators.includes(condition.operator as OperatorName)) {
        malformed = true;
        return add('invalid_operator_for_field', 'error', index, `${where}: operator '${condition.operator}' cannot be used on ${spec.name} (${spec.value_type}).`,
          `Use one of: ${spec.valid_operators.join(', ')}.`);
      }
      const shape = OPERATOR_SHAPE[condition.operator as OperatorName];
      const operands = operandsOf(condition);
      // An address-book condition without ids means the whole book of the chain.
      if ((operands.length === 0 && !isAddressBookOperator(condition.operator)) || operands.some((operand) => operand === undefined || operand === null)) {
        malformed = true;
        const needs = shape === 'array' ? 'a non-empty `values` array' : shape === 'range' ? 'both `min` and `max`' : '`value`';
        return add('missing_values', 'error', index, `${where}: ${condition.operator} needs ${needs}.`, `Give ${needs}.`);
      }
      const misfit = operands.find((operand) => !operandFits(spec, condition.operator, operand));
      if (misfit !== undefined) {
        malformed = true;
        const expected = spec.value_type === 'enum' ? `one of ${(spec.enum_values ?? []).join(', ')}` : withArticle(spec.value_type);
        return add('value_type_mismatch', 'error', index, `${where}: ${JSON.stringify(misfit)} is not ${expected} (${spec.name}).`, `Give ${expected}.`);
      }
      if (shape === 'range' && decimal(condition.min)!.gt(decimal(condition.max)!)) {
        malformed = true;
        return add('invalid_range', 'error', index, `${where}: min ${String(condition.min)} is above max ${String(condition.max)}.`, 'Swap min and max.');
      }
    });
    wellFormed.push(malformed ? null : conditions);

    if (!malformed) {
      const byField = groupByField(conditions);
      for (const [fieldName, group] of byField) {
        if (group.length > 1 && contradictory(group, FIELD_BY_NAME.get(fieldName)!)) {
          add('contradictory_conditions', 'error', index, `The conditions on ${fieldName} can never all hold, so the rule never matches.`,
            `Loosen or remove one of the conditions on ${fieldName}.`);
        }
      }
    }

    const name = rule.name?.trim().toLowerCase();
    if (name) {
      const first = seenNames.get(name);
      if (first !== undefined) {
        add('duplicate_rule_name', 'warning', index, `Rule name '${rule.name}' is already used by rule ${first}.`, 'Give each rule a distinct name.');
      } else {
        seenNames.set(name, index);
      }
    }

    checkActionConfig(rule, index, context, add);

    const shadower = wellFormed.slice(0, index).findIndex((earlier) => earlier !== null && shadows(earlier, conditions));
    if (shadower >= 0) {
      const always = wellFormed[shadower]!.length === 0;
      add('unreachable_rule', 'warning', index,
        always
          ? `Rule ${shadower} has no conditions and always matches, so this rule is never reached.`
          : `Every request this rule matches is matched first by rule ${shadower}, so it is never reached.`,
        `Move this rule before rule ${shadower}, or narrow rule ${shadower}.`);
    }
  });

  const last = rules[rules.length - 1];
  if (last && !isCatchAll(last.conditions ?? [])) {
    add('no_catch_all', 'info', rules.length - 1, 'No final catch-all rule: requests that match no rule fall through to the next policy, and are denied by default.',
      'End with a rule that states the default explicitly, e.g. amount greater_than_or_equal 0 with action block or allow.');
  }

  const issue_count = { error: 0, warning: 0, info: 0 };
  for (const diagnostic of diagnostics) issue_count[diagnostic.severity] += 1;
  return { object: 'policy_validation', valid: issue_count.error === 0, issue_count, diagnostics };
}

function groupByField(conditions: readonly Condition[]): Map<string, Condition[]> {
  const groups = new Map<string, Condition[]>();
  for (const condition of conditions) groups.set(condition.field, [...(groups.get(condition.field) ?? []), condition]);
  return groups;
}

/** True when every request that meets `later` also meets all of `earlier`. */
function shadows(earlier: readonly Condition[], later: readonly Condition[]): boolean {
  return earlier.every((needed) =>
    later.some((given) => given.field === needed.field && implies(given, needed, FIELD_BY_NAME.get(needed.field)!)),
  );
}

/** Deliberate catch-all: no conditions, or only `>= 0` on (non-negative) decimal fields. */
function isCatchAll(conditions: readonly Condition[]): boolean {
  return conditions.every(
    (c) => FIELD_BY_NAME.get(c.field)?.value_type === 'decimal' && c.operator === 'greater_than_or_equal' && decimal(c.value)?.isZero() === true,
  );
}

function checkActionConfig(
  rule: DraftRule,
  index: number,
  context: ValidationContext,
  add: (code: string, severity: Severity, index: number | null, message: string, fix: string) => void,
): void {
  const parsed = ACTION_CONFIG_SCHEMAS[rule.action_type].safeParse(rule.action_config ?? {}, { error: describeIssue });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    add('invalid_action_config', 'error', index, `action_config for ${rule.action_type}: ${namedIssueMessage(issue.path.join('.') || 'action_config', issue.message)}.`,
      'Follow the config_schema of this action type in GET /v1/policies/schema.');
    return;
  }
  if (rule.action_type !== 'require_approval') return;
  const config = parsed.data as { approvers: { id: string }[]; required_approvals: number };
  const unknown = config.approvers.filter((approver) => !context.approvers.has(approver.id));
  if (unknown.length) {
    add('approvers_unknown', 'error', index, `Unknown approver(s): ${unknown.map((a) => a.id).join(', ')}.`,
      'Pick approvers from GET /v1/policies/approver-candidates.');
  }
  const members = new Set(config.approvers.flatMap((approver) => context.approvers.get(approver.id) ?? []));
  if (config.required_approvals > members.size) {
    add('required_approvals_exceeds_approvers', 'error', index,
      `required_approvals is ${config.required_approvals} but the approvers stand for ${members.size} member(s).`,
      `Lower required_approvals to at most ${members.size}, or add approvers.`);
  }
}
