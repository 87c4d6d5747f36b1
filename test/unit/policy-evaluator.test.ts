import assert from 'node:assert/strict';
import fc from 'fast-check';
import Decimal from 'decimal.js';
import { evaluatePolicies, type EvaluablePolicy, type EvaluableRule, type EvaluationRequest } from '../../src/policies/evaluator';
import type { ActionType, Condition } from '../../src/policies/schema';
import { validatePolicyRules } from '../../src/policies/validator';

/**
 * A deliberately plain reference: sort policies by priority (stable), rules by order, and return
 * the first rule all of whose conditions hold, with the semantics written out once more by hand.
 */
function referenceFirstMatch(policies: EvaluablePolicy[], request: EvaluationRequest): { policyId: string; ruleId: string } | null {
  const ordered = policies.map((p, i) => ({ p, i })).sort((a, b) => a.p.priority - b.p.priority || a.i - b.i);
  for (const { p } of ordered) {
    for (const rule of [...p.rules].sort((a, b) => a.order - b.order)) {
      if (rule.conditions.every((c) => referenceHolds(c, request[c.field]))) return { policyId: p.id, ruleId: rule.id };
    }
  }
  return null;
}

function referenceHolds(c: Condition, actual: unknown): boolean {
  if (actual === undefined) return false;
  if (c.field === 'chain') {
    const a = String(actual);
    if (c.operator === 'equal') return a === c.value;
    if (c.operator === 'not_equal') return a !== c.value;
    if (c.operator === 'in') return (c.values ?? []).includes(a);
    if (c.operator === 'not_in') return !(c.values ?? []).includes(a);
    return false;
  }
  const a = new Decimal(String(actual));
  const v = (x: unknown) => new Decimal(String(x));
  switch (c.operator) {
    case 'equal': return a.eq(v(c.value));
    case 'not_equal': return !a.eq(v(c.value));
    case 'greater_than': return a.gt(v(c.value));
    case 'less_than': return a.lt(v(c.value));
    case 'greater_than_or_equal': return a.gte(v(c.value));
    case 'less_than_or_equal': return a.lte(v(c.value));
    case 'between': return a.gte(v(c.min)) && a.lte(v(c.max));
    case 'not_between': return a.lt(v(c.min)) || a.gt(v(c.max));
    case 'in': return (c.values ?? []).some((x) => a.eq(v(x)));
    case 'not_in': return !(c.values ?? []).some((x) => a.eq(v(x)));
    default: return false;
  }
}

// Small value domains, so that rules overlap, shadow and contradict each other often.
const amount = fc.constantFrom('0', '1', '1.5', '2', '5', '10', '10.00', '20');
const chain = fc.constantFrom('bitcoin', 'ethereum', 'tron');
const amountCondition: fc.Arbitrary<Condition> = fc.oneof(
  fc.record({ field: fc.constant('amount'), operator: fc.constantFrom('equal', 'not_equal', 'greater_than', 'less_than', 'greater_than_or_equal', 'less_than_or_equal'), value: amount }),
  fc.record({ field: fc.constant('amount'), operator: fc.constantFrom('between', 'not_between'), min: amount, max: amount }).filter((c) => new Decimal(c.min).lte(c.max)),
  fc.record({ field: fc.constant('amount'), operator: fc.constantFrom('in', 'not_in'), values: fc.array(amount, { minLength: 1, maxLength: 3 }) }),
);
const chainCondition: fc.Arbitrary<Condition> = fc.oneof(
  fc.record({ field: fc.constant('chain'), operator: fc.constantFrom('equal', 'not_equal'), value: chain }),
  fc.record({ field: fc.constant('chain'), operator: fc.constantFrom('in', 'not_in'), values: fc.array(chain, { minLength: 1, maxLength: 2 }) }),
);
const rules = fc.array(
  fc.record({ action: fc.constantFrom<ActionType>('allow', 'block', 'alert'), conditions: fc.array(fc.oneof(amountCondition, chainCondition), { maxLength: 3 }) }),
  { minLength: 1, maxLength: 6 },
);
const policies = fc.array(fc.record({ priority: fc.integer({ min: 0, max: 3 }), rules }), { maxLength: 3 }).map((list) =>
  list.map(
    (p, pi): EvaluablePolicy => ({
      id: `pol_${pi}`,
      category: 'access',
      priority: p.priority,
      rules: p.rules.map((r, ri): EvaluableRule => ({ id: `pol_${pi}_rule_${ri}`, name: `r${ri}`, order: ri + 1, actionType: r.action, actionConfig: {}, conditions: r.conditions })),
    }),
  ),
);
const request = fc.record({ amount, chain }, { requiredKeys: [] });

describe('Policy evaluator (properties)', () => {
  it('picks the same first match as a plain reference scan, and the verdict follows its action', () => {
    fc.assert(
      fc.property(policies, request, (ps, req) => {
        const result = evaluatePolicies(ps, req);
        const expected = referenceFirstMatch(ps, req);
        assert.equal(result.rule_id, expected?.ruleId ?? null);
        assert.equal(result.policy_id, expected?.policyId ?? null);
        if (!expected) {
          assert.equal(result.result, 'no_match');
          assert.equal(result.allowed, ps.length === 0);
        } else {
          const action = ps.flatMap((p) => p.rules).find((r) => r.id === expected.ruleId)!.actionType;
          assert.equal(result.allowed, action !== 'block');
          assert.equal(result.trace!.at(-1)!.terminal, true);
          assert.equal(result.trace!.filter((entry) => entry.matched).length, 1);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('never lets a rule reported unreachable be the first match, nor a contradictory one match at all', () => {
    let shadowedByConditions = 0;
    fc.assert(
      fc.property(policies.filter((ps) => ps.length > 0), fc.array(request, { minLength: 1, maxLength: 20 }), (ps, requests) => {
        const policy = ps[0]!;
        const validation = validatePolicyRules(
          policy.rules.map((r) => ({ id: r.id, name: r.name, action_type: r.actionType, action_config: {}, conditions: r.conditions })),
          { approvers: new Map() },
        );
        shadowedByConditions += validation.diagnostics.filter((d) => d.code === 'unreachable_rule' && d.message.startsWith('Every request')).length;
        const dead = new Set(validation.diagnostics.filter((d) => d.code === 'unreachable_rule' || d.code === 'contradictory_conditions').map((d) => d.rule_id));
        for (const req of requests) {
          const result = evaluatePolicies([policy], req);
          assert.ok(!dead.has(result.rule_id), `rule ${result.rule_id} was reported dead but matched first`);
        }
      }),
      { numRuns: 2000 },
    );
    assert.ok(shadowedByConditions > 50, 'the generator must produce rules shadowed by conditions, not only by empty rules');
  });
});

describe('Policy evaluator and validator (examples)', () => {
  const rule = (id: string, conditions: Condition[], actionType: ActionType = 'block', actionConfig: Record<string, unknown> = {}): EvaluableRule => ({
    id, name: id, order: Number(id.slice(1)), actionType, actionConfig, conditions,
  });
  const policy = (rules: EvaluableRule[], category = 'limits'): EvaluablePolicy => ({ id: 'pol', category, priority: 1, rules });

  it('compares decimals exactly: 0.1 + 0.2 equals 0.3', () => {
    const sum = new Decimal('0.1').plus('0.2').toString();
    const p = policy([rule('r1', [{ field: 'amount', operator: 'equal', value: '0.3' }])]);
    assert.equal(evaluatePolicies([p], { amount: sum }).result, 'rejected');
    assert.equal(evaluatePolicies([p], { amount: '0.30' }).result, 'rejected');
    assert.equal(evaluatePolicies([p], { amount: '0.3000000000000001' }).result, 'no_match');
  });

  it('traces each visited rule with the first failed condition', () => {
    const p = policy([
      rule('r1', [{ field: 'chain', operator: 'equal', value: 'tron' }, { field: 'amount', operator: 'greater_than', value: '5' }]),
      rule('r2', [{ field: 'amount', operator: 'greater_than', value: '5' }], 'delay', { delay_minutes: 30 }),
    ]);
    const result = evaluatePolicies([p], { chain: 'ethereum', amount: '6' });
    assert.equal(result.result, 'delayed');
    assert.equal(result.delay_minutes, 30);
    assert.deepEqual(result.trace![0]!.failed_condition, { field: 'chain', operator: 'equal', expected: 'tron', actual: 'ethereum' });
    assert.deepEqual(result.trace!.map((e) => [e.rule_index, e.matched, e.terminal]), [[0, false, false], [1, true, true]]);
  });

  it('reaches awaiting_approval, approved and quorum from a require_approval rule', () => {
    const config = { approvers: [{ id: 'm1', type: 'user' }], required_approvals: 2, expiry_hours: 12 };
    const approvals = policy([rule('r1', [{ field: 'amount', operator: 'greater_than', value: '1' }], 'require_approval', config)], 'approvals');
    const waiting = evaluatePolicies([approvals], { amount: '2' });
    assert.deepEqual([waiting.result, waiting.allowed, waiting.requires_approval, waiting.required_approvals, waiting.expiry_hours], ['awaiting_approval', false, true, 2, 12]);
    assert.equal(evaluatePolicies([approvals], { amount: '2', approval_count: 2 }).result, 'approved');
    const quorum = evaluatePolicies([{ ...approvals, category: 'quorum' }], { amount: '2' });
    assert.equal(quorum.result, 'quorum');
    assert.equal(quorum.trace, undefined);
  });

  it('takes an unknown value or destination to meet a restraining rule, never an allow rule; a field merely absent fails', () => {
    const p = policy([
      rule('r1', [{ field: 'amount', operator: 'less_than', value: '1' }], 'allow'),
      rule('r2', [{ field: 'spender', operator: 'equal', value: '0xbad' }]),
      rule('r3', [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }]),
    ]);
    const undecoded = evaluatePolicies([p], { operation_type: 'sign', price_unavailable: true, destination_type: 'unknown' });
    assert.deepEqual([undecoded.rule_id, undecoded.result], ['r2', 'rejected']);
    assert.match(undecoded.trace![1]!.note!, /destination_type unknown/);
    const unknownValue = evaluatePolicies([p], { operation_type: 'sign', price_unavailable: true, destination_type: 'one_time_address', to_address: '0xgood' });
    assert.deepEqual([unknownValue.rule_id, unknownValue.price_unavailable], ['r3', true]);
    // Nothing says these are unknown: absent, they fail as ever (a dry run that leaves them out).
    assert.equal(evaluatePolicies([p], { operation_type: 'transfer' }).result, 'no_match');
  });

  it('lets a request that needs a named allow through only a rule naming its operation type, and refuses it with no policy', () => {
    const raw = { operation_type: 'sign_raw', chain: 'ethereum' };
    const named = { namedAllowRequired: true };
    assert.deepEqual([evaluatePolicies([], raw, named).allowed, evaluatePolicies([], raw).allowed], [false, true]);
    const anyEthereum = rule('r1', [{ field: 'chain', operator: 'equal', value: 'ethereum' }], 'allow');
    const namesIt = rule('r2', [{ field: 'operation_type', operator: 'in', values: ['sign', 'sign_raw'] }], 'alert');
    const skipped = evaluatePolicies([policy([anyEthereum])], raw, named);
    assert.deepEqual([skipped.result, skipped.allowed], ['no_match', false]);
    assert.match(skipped.reason, /sign_raw through by name/);
    const letThrough = evaluatePolicies([policy([anyEthereum, namesIt])], raw, named);
    assert.deepEqual([letThrough.rule_id, letThrough.allowed, letThrough.trace![0]!.failed_condition!.field], ['r2', true, 'operation_type']);
    assert.equal(evaluatePolicies([policy([rule('r3', [{ field: 'chain', operator: 'equal', value: 'ethereum' }])])], raw, named).result, 'rejected');
  });

  it('reports each diagnostic with severity, rule index and a fix', () => {
    const approvers = new Map([['m1', ['m1']], ['role_a', ['m1', 'm2']]]);
    const { diagnostics, valid, issue_count } = validatePolicyRules(
      [
        { id: 'a', name: 'Same', action_type: 'allow', conditions: [{ field: 'colour', operator: 'equal', value: 'red' }] },
        { id: 'b', name: 'same', action_type: 'block', conditions: [{ field: 'amount', operator: 'contains', value: '1' }] },
        { id: 'c', name: 'c', action_type: 'block', conditions: [{ field: 'amount', operator: 'equal', value: 'lots' }] },
        { id: 'd', name: 'd', action_type: 'block', conditions: [{ field: 'amount', operator: 'between', min: '5', max: '1' }] },
        { id: 'e', name: 'e', action_type: 'block', conditions: [{ field: 'amount', operator: 'in', values: [] }] },
        { id: 'f', name: 'f', action_type: 'block', conditions: [{ field: 'amount', operator: 'greater_than', value: '5' }, { field: 'amount', operator: 'less_than', value: '2' }] },
        { id: 'g', name: 'g', action_type: 'require_approval', conditions: [{ field: 'chain', operator: 'equal', value: 'tron' }],
          action_config: { approvers: [{ id: 'ghost', type: 'user' }, { id: 'role_a', type: 'role' }], required_approvals: 3 } },
        { id: 'h', name: 'h', action_type: 'alert', conditions: [] },
        { id: 'i', name: 'i', action_type: 'block', conditions: [{ field: 'chain', operator: 'equal', value: 'tron' }] },
      ],
      { approvers },
    );
    const byCode = Object.fromEntries(diagnostics.map((d) => [d.code, d]));
    assert.equal(byCode.invalid_field!.rule_index, 0);
    assert.equal(byCode.duplicate_rule_name!.rule_id, 'b');
    assert.equal(byCode.invalid_operator_for_field!.rule_index, 1);
    assert.equal(byCode.value_type_mismatch!.rule_index, 2);
    assert.equal(byCode.invalid_range!.rule_index, 3);
    assert.equal(byCode.missing_values!.rule_index, 4);
    assert.equal(byCode.contradictory_conditions!.rule_index, 5);
    assert.equal(byCode.approvers_unknown!.rule_index, 6);
    assert.equal(byCode.required_approvals_exceeds_approvers!.rule_index, 6);
    assert.equal(byCode.empty_conditions!.severity, 'error');
    assert.equal(byCode.unreachable_rule!.rule_id, 'i');
    assert.equal(byCode.no_catch_all!.severity, 'info');
    assert.ok(diagnostics.every((d) => d.suggested_fix.length > 0));
    assert.equal(valid, false);
    assert.equal(issue_count.error + issue_count.warning + issue_count.info, diagnostics.length);
    // One severity per diagnostic: activation refuses what validation reports as an error.
    assert.deepEqual(validatePolicyRules([], { approvers }).diagnostics.map((d) => [d.code, d.severity]), [['empty_policy', 'error']]);
  });
});
