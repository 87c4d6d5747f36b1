import { evaluatePolicies, type EvaluablePolicy, type EvaluableRule, type EvaluationContext, type EvaluationRequest } from '../src/policies/evaluator';
import type { ActionType, Condition } from '../src/policies/schema';
import { BENCH_SECONDS, report, runBenchmark } from './support';

/**
 * The policy evaluator in process, as sending calls it before every transaction: one enforced
 * policy of 50 rules of every condition kind (amounts, USD values, destinations and the address
 * book, chains, assets, actors, rolling velocity windows), against requests that match early, late
 * or not at all. The baseline is the same loop over a policy of one rule, so the ratio is the price
 * of the 49 others; the goal is 100,000 evaluations per second.
 */
const GOAL_PER_SECOND = 100_000;
const RULE_COUNT = 50;

const CHAINS = ['bitcoin', 'ethereum', 'tron', 'solana'];
const ASSETS = ['BTC', 'ETH', 'USDC_ETH', 'USDT_ETH', 'TRX', 'USDT_TRX', 'SOL', 'USDC_SOL'];

/** Rule i's conditions: a rotation of the condition kinds, each narrow enough that most requests fail one of them. */
function conditionsOf(i: number): Condition[] {
  const chain = CHAINS[i % CHAINS.length]!;
  const asset = ASSETS[i % ASSETS.length]!;
  switch (i % 10) {
    case 0:
      return [{ field: 'chain', operator: 'equal', value: chain }, { field: 'amount', operator: 'greater_than', value: String(1000 + i) }];
    case 1:
      return [{ field: 'asset_symbol', operator: 'in', values: [asset, 'DAI', 'WBTC'] }, { field: 'amount_usd', operator: 'between', min: String(50_000 + i), max: '250000.5' }];
    case 2:
      return [{ field: 'to_address', operator: 'in', values: [`0xdead${i}`, `0xbeef${i}`, `0xcafe${i}`] }];
    case 3:
      return [{ field: 'to_address', operator: 'not_in_address_book' }, { field: 'asset_symbol', operator: 'equal', value: asset }, { field: 'amount_usd', operator: 'greater_than_or_equal', value: String(10_000 + i) }];
    case 4:
      return [
        { field: 'velocity_amount_usd_24h', operator: 'between', min: String(500_000 + i * 10_000), max: String(509_999 + i * 10_000) },
        { field: 'velocity_count_24h', operator: 'greater_than', value: '10' },
      ];
    case 5:
      return [{ field: 'velocity_count_1h', operator: 'greater_than_or_equal', value: String(100 + i) }, { field: 'chain', operator: 'not_equal', value: 'bitcoin' }];
    case 6:
      return [{ field: 'actor_type', operator: 'equal', value: 'session' }, { field: 'user_id', operator: 'equal', value: `user_${i}` }];
    case 7:
      return [{ field: 'is_automated', operator: 'equal', value: true }, { field: 'automation_rule_id', operator: 'not_in', values: ['auto_1', 'auto_2'] }, { field: 'amount', operator: 'less_than_or_equal', value: '0.000001' }];
    case 8:
      return [{ field: 'from_address', operator: 'contains', value: `cold${i}` }, { field: 'amount_raw', operator: 'not_between', min: '0', max: String(10n ** 24n) }];
    default:
      return [{ field: 'wallet_id', operator: 'equal', value: `wallet_${i}` }, { field: 'network', operator: 'in', values: ['mainnet', 'sepolia'] }, { field: 'amount', operator: 'equal', value: `${i}.50` }];
  }
}

const ACTIONS: ActionType[] = ['block', 'alert', 'delay', 'require_approval', 'allow'];
const ACTION_CONFIG: Record<ActionType, Record<string, unknown>> = {
  allow: {},
  block: { reason: 'Over the limit' },
  alert: { message: 'Look at this' },
  delay: { delay_minutes: 30 },
  require_approval: { approvers: [{ id: 'role_admin', type: 'role' }], required_approvals: 2, expiry_hours: 24 },
};

function policyOf(ruleCount: number): EvaluablePolicy {
  const rules: EvaluableRule[] = Array.from({ length: ruleCount }, (_, i) => {
    const actionType = ACTIONS[i % ACTIONS.length]!;
    return { id: `rule_${i}`, name: `Rule ${i}`, order: i + 1, actionType, actionConfig: ACTION_CONFIG[actionType], conditions: conditionsOf(i) };
  });
  return { id: 'pol_bench', category: 'limits', priority: 1, rules };
}

const ordinary: EvaluationRequest = {
  actor_type: 'apikey',
  actor_id: 'key_1',
  amount: '12.5',
  amount_raw: '12500000',
  amount_usd: '12.5',
  asset_symbol: 'USDC_ETH',
  chain: 'ethereum',
  network: 'mainnet',
  from_address: '0xhot0001',
  to_address: '0x1234abcd',
  wallet_id: 'wallet_x',
  vault_id: 'vault_x',
  operation_type: 'transfer',
  is_automated: false,
  velocity_amount_usd_24h: '900',
  velocity_amount_usd_1h: '100',
  velocity_count_24h: 4,
  velocity_count_1h: 1,
};

/** The request mix: each matches the rule it is named after, or none. */
const REQUESTS: { name: string; request: EvaluationRequest; context: EvaluationContext }[] = [
  { name: 'rule 0 (early)', request: { ...ordinary, chain: 'bitcoin', amount: '5000' }, context: {} },
  { name: 'rule 2 (early)', request: { ...ordinary, to_address: '0xbeef2' }, context: {} },
  { name: 'rule 13 (middle)', request: { ...ordinary, asset_symbol: 'USDT_TRX', amount_usd: '20000' }, context: { addressBookEntryIds: [] } },
  { name: 'rule 24 (middle)', request: { ...ordinary, velocity_amount_usd_24h: '745000', velocity_count_24h: 20 }, context: {} },
  { name: 'rule 46 (late)', request: { ...ordinary, actor_type: 'session', user_id: 'user_46' }, context: {} },
  { name: 'rule 49 (last)', request: { ...ordinary, wallet_id: 'wallet_49', amount: '49.5' }, context: {} },
  { name: 'none', request: ordinary, context: { addressBookEntryIds: ['abe_1'] } },
  { name: 'none, sparse request', request: { amount: '1', chain: 'tron' }, context: {} },
];

/** Evaluations per second of the request mix against `policies`, after a one-second warm-up. */
function measure(policies: EvaluablePolicy[], seconds: number): number {
  const run = (deadline: number) => {
    let count = 0;
    while (performance.now() < deadline) {
      // A batch between clock reads, so the clock is not what we measure.
      for (let batch = 0; batch < 100; batch++) {
        const { request, context } = REQUESTS[count % REQUESTS.length]!;
        evaluatePolicies(policies, request, context);
        count++;
      }
    }
    return count;
  };
  run(performance.now() + 1000);
  const started = performance.now();
  const count = run(started + seconds * 1000);
  return count / ((performance.now() - started) / 1000);
}

async function main() {
  const full = policyOf(RULE_COUNT);
  // Each request must decide where its name says: the mix is what it claims to be.
  for (const { name, request, context } of REQUESTS) {
    const ruleId = evaluatePolicies([full], request, context).rule_id;
    const expected = name.startsWith('none') ? null : `rule_${/rule (\d+)/.exec(name)![1]}`;
    if (ruleId !== expected) throw new Error(`request '${name}' decided by ${ruleId}, expected ${expected}`);
  }
  const single = measure([policyOf(1)], BENCH_SECONDS);
  const fifty = measure([full], BENCH_SECONDS);
  const rows = [
    { target: '1-rule policy (baseline)', evaluations_per_second: Math.round(single) },
    { target: `${RULE_COUNT}-rule policy`, evaluations_per_second: Math.round(fifty) },
  ];
  await report('policy-evaluation', rows, [
    { name: `${RULE_COUNT}-rule evaluations/s / ${GOAL_PER_SECOND}`, value: fifty / GOAL_PER_SECOND, goal: 1 },
    { name: `${RULE_COUNT}-rule / 1-rule evaluations/s`, value: fifty / single },
  ], { requests: REQUESTS.map((each) => each.name) });
}

runBenchmark(main);
