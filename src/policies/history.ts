import type { EntityManager } from '@mikro-orm/postgresql';
import { findWallet } from '../custody/service';
import { errors } from '../shared/errors';
import { Money, isDisplayAmount, type MoneyValue } from '../shared/money';
import { OutgoingTransaction, type TransactionStatus } from '../transactions/entities';
import { PolicyAuditLog, type Policy } from './entities';
import { OUTCOMES, evaluatePolicies, outcomeOf, type EvaluablePolicy, type EvaluationContext, type EvaluationRequest, type EvaluationResult, type Outcome } from './evaluator';
import { evaluationContext, whatIfPolicySets } from './decisions';

/**
 * The what-if over history: a draft replayed over what the organization actually asked to send in
 * one environment, in time order, with the velocity fields recomputed as the draft would have seen
 * them. A request the draft would not have let through was not sent, so it does not count toward
 * the velocity of later ones; one it would have let through counts, even if it was refused at the
 * time. Nothing is written.
 */

/** Past requests one simulation replays at most (transactions of the 24 h before `from` included). */
const HISTORY_REPLAY_MAX = 100_000;
const HOUR_MS = 3_600_000;
const PAGE_SIZE = 1000;

export interface HistoryWindow {
  from: Date;
  to: Date;
  walletId?: string;
  includeRefused: boolean;
}

interface VelocityFields {
  velocity_amount_usd_24h: string;
  velocity_amount_usd_1h: string;
  velocity_count_24h: string;
  velocity_count_1h: string;
}

/**
 * Sends in time order, answering the velocity fields at a moment: the sends of the rolling 24 h
 * and 1 h before it (`at - window <= sent_at`, sent earlier in the replay). A send without a USD
 * value counts in the counts and adds nothing to the amounts. Moments must not go backwards.
 */
class VelocityWindow {
  private sends: { at: number; usd: MoneyValue }[] = [];
  private start24h = 0;
  private start1h = 0;
  private sum24h = new Money(0);
  private sum1h = new Money(0);

  add(at: Date, usd: MoneyValue | null): void {
    const value = usd ?? new Money(0);
    this.sends.push({ at: at.getTime(), usd: value });
    this.sum24h = this.sum24h.plus(value);
    this.sum1h = this.sum1h.plus(value);
  }

  at(moment: Date): VelocityFields {
    const now = moment.getTime();
    while (this.start24h < this.sends.length && this.sends[this.start24h]!.at < now - 24 * HOUR_MS) this.sum24h = this.sum24h.minus(this.sends[this.start24h++]!.usd);
    while (this.start1h < this.sends.length && this.sends[this.start1h]!.at < now - HOUR_MS) this.sum1h = this.sum1h.minus(this.sends[this.start1h++]!.usd);
    if (this.start24h >= PAGE_SIZE) {
      // Keep only the last 24 h: a 90-day replay holds one day of sends, not ninety.
      this.sends = this.sends.slice(this.start24h);
      this.start1h -= this.start24h;
      this.start24h = 0;
    }
    return {
      velocity_amount_usd_24h: this.sum24h.toFixed(),
      velocity_amount_usd_1h: this.sum1h.toFixed(),
      velocity_count_24h: String(this.sends.length - this.start24h),
      velocity_count_1h: String(this.sends.length - this.start1h),
    };
  }
}

type Decision = Pick<EvaluationResult, 'allowed' | 'result' | 'requires_approval' | 'policy_id' | 'rule_id'>;

/** One past request as it was decided: a transaction (it was sent) or a refused request from the policy audit log. */
interface PastRequest {
  source: 'transaction' | 'refused_request';
  id: string;
  at: Date;
  walletId: string | null;
  request: EvaluationRequest;
  amountUsd: MoneyValue | null;
  actual: { outcome: Outcome; result: string; policy_id: string | null; rule_id: string | null };
  transaction: { assetId: string; amountRaw: string; toAddress: string; status: TransactionStatus } | null;
}

const usdOf = (...values: unknown[]): MoneyValue | null => {
  const value = values.find((v): v is string => typeof v === 'string' && isDisplayAmount(v));
  return value === undefined ? null : new Money(value);
};

/** A transaction was sent: whatever decided it, it was allowed. A failed one is replayed but never counts toward velocity (as at send time). */
function fromTransaction(tx: OutgoingTransaction): PastRequest {
  const request = tx.policyRequest as EvaluationRequest;
  return {
    source: 'transaction',
    id: tx.id,
    at: tx.createdAt,
    walletId: tx.wallet.id,
    request,
    amountUsd: usdOf(tx.amountUsd, request.amount_usd),
    actual: { outcome: 'allowed', result: tx.policyDecision.result, policy_id: tx.policyDecision.policy_id, rule_id: tx.policyDecision.rule_id },
    transaction: { assetId: tx.assetId, amountRaw: tx.amount, toAddress: tx.toAddress, status: tx.status },
  };
}

function fromRefusal(entry: PolicyAuditLog): PastRequest {
  const request = (entry.metadata.request ?? {}) as EvaluationRequest;
  const decision = entry.metadata.decision as Decision;
  return {
    source: 'refused_request',
    id: entry.id,
    at: entry.createdAt,
    walletId: typeof request.wallet_id === 'string' ? request.wallet_id : null,
    request,
    amountUsd: usdOf(request.amount_usd),
    actual: { outcome: outcomeOf(decision), result: decision.result, policy_id: decision.policy_id, rule_id: decision.rule_id },
    transaction: null,
  };
}

type Scope = { organization: string; environment: Policy['environment'] };

const transactionFilter = (scope: Scope, from: Date, to: Date) => ({ ...scope, createdAt: { $gte: from, $lt: to } });
// Every decision is logged; the allowed ones became transactions, so only the refusals are read here.
const refusalFilter = (scope: Scope, from: Date, to: Date) => ({ ...scope, action: 'decision', metadata: { decision: { allowed: false } }, createdAt: { $gte: from, $lt: to } });

/** Pages through rows in (created_at, id) order, one page in memory at a time. */
async function* inTimeOrder<T extends { createdAt: Date; id: string }>(load: (after: object, limit: number) => Promise<T[]>): AsyncGenerator<T> {
  let after: object = {};
  for (;;) {
    const page = await load(after, PAGE_SIZE);
    yield* page;
    if (page.length < PAGE_SIZE) return;
    const last = page[page.length - 1]!;
    after = { $or: [{ createdAt: { $gt: last.createdAt } }, { createdAt: last.createdAt, id: { $gt: last.id } }] };
  }
}

async function* pastRequests(em: EntityManager, scope: Scope, from: Date, to: Date, includeRefused: boolean): AsyncGenerator<PastRequest> {
  const transactions = inTimeOrder((after, limit) =>
    em.find(
      OutgoingTransaction,
      { ...transactionFilter(scope, from, to), ...after },
      {
        fields: ['id', 'createdAt', 'wallet', 'assetId', 'amount', 'toAddress', 'status', 'amountUsd', 'policyRequest', 'policyDecision'],
        orderBy: [{ createdAt: 'asc' }, { id: 'asc' }],
        limit,
        disableIdentityMap: true,
      },
    ),
  );
  const refusals = inTimeOrder((after, limit) =>
    includeRefused
      ? em.find(PolicyAuditLog, { ...refusalFilter(scope, from, to), ...after }, { orderBy: [{ createdAt: 'asc' }, { id: 'asc' }], limit, disableIdentityMap: true })
      : Promise.resolve([]),
  );
  // Merge the two ordered streams; at the same instant the transaction comes first.
  let tx = await transactions.next();
  let refused = await refusals.next();
  while (!tx.done || !refused.done) {
    if (refused.done || (!tx.done && tx.value.createdAt <= refused.value.createdAt)) {
      yield fromTransaction(tx.value);
      tx = await transactions.next();
    } else {
      yield fromRefusal(refused.value);
      refused = await refusals.next();
    }
  }
}

/** One policy set's replay: its velocity window and its evaluation of each past request. */
class Replay {
  private readonly velocity = new VelocityWindow();
  constructor(private readonly policies: readonly EvaluablePolicy[]) {}

  /** What happened before the window: sends count as they were. */
  happened(past: PastRequest): void {
    if (past.transaction && past.transaction.status !== 'failed') this.velocity.add(past.at, past.amountUsd);
  }

  decide(past: PastRequest, context: EvaluationContext): { evaluation: EvaluationResult; outcome: Outcome; velocity: VelocityFields } {
    const velocity = this.velocity.at(past.at);
    const evaluation = evaluatePolicies(this.policies, { ...past.request, ...velocity }, context);
    const outcome = outcomeOf(evaluation);
    // Sent under this policy set, unless it failed on chain (a refusal that would have gone through is assumed to succeed).
    if (outcome === 'allowed' && past.transaction?.status !== 'failed') this.velocity.add(past.at, past.amountUsd);
    return { evaluation, outcome, velocity };
  }
}

const perOutcome = <T>(make: () => T): Record<Outcome, T> => ({ allowed: make(), blocked: make(), held_for_approval: make(), delayed: make() });

interface HistoryExample {
  source: 'transaction' | 'refused_request';
  transaction_id: string | null;
  audit_log_id: string | null;
  created_at: string;
  wallet_id: string | null;
  status: TransactionStatus | null;
  asset_id: string | null;
  asset_symbol: string | null;
  amount: string | null;
  amount_raw: string | null;
  amount_usd: string | null;
  to_address: string | null;
  actual: { outcome: Outcome; result: string; policy_id: string | null; rule_id: string | null };
  draft: { outcome: Outcome; result: EvaluationResult['result']; policy_id: string | null; rule_id: string | null; rule_name: string | null; reason: string };
  changed: boolean;
  velocity: VelocityFields;
}

const text = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

function exampleOf(past: PastRequest, draft: ReturnType<Replay['decide']>, ruleNames: Map<string, string>): HistoryExample {
  const { request, transaction } = past;
  return {
    source: past.source,
    transaction_id: transaction ? past.id : null,
    audit_log_id: transaction ? null : past.id,
    created_at: past.at.toISOString(),
    wallet_id: past.walletId,
    status: transaction?.status ?? null,
    asset_id: transaction?.assetId ?? null,
    asset_symbol: text(request.asset_symbol),
    amount: text(request.amount),
    amount_raw: transaction?.amountRaw ?? text(request.amount_raw),
    amount_usd: past.amountUsd?.toFixed() ?? null,
    to_address: transaction?.toAddress ?? text(request.to_address),
    actual: past.actual,
    draft: {
      outcome: draft.outcome,
      result: draft.evaluation.result,
      policy_id: draft.evaluation.policy_id,
      rule_id: draft.evaluation.rule_id,
      rule_name: draft.evaluation.rule_id ? (ruleNames.get(draft.evaluation.rule_id) ?? null) : null,
      reason: draft.evaluation.reason,
    },
    changed: draft.outcome !== past.actual.outcome,
    velocity: draft.velocity,
  };
}

/**
 * Replays `policy` (in place of what it replaces, among the policies enforced now) over the
 * environment's past requests in the window, and the policies enforced now over the same, each with
 * its own velocity. Reports what the draft would have done against what actually happened.
 */
export async function simulateHistory(em: EntityManager, policy: Policy, window: HistoryWindow, exampleLimit: number) {
  const scope: Scope = { organization: policy.organization.id, environment: policy.environment };
  if (window.walletId) await findWallet(em, { organizationId: scope.organization, environment: scope.environment }, window.walletId, 'history.wallet_id');
  // Velocity at `from` needs the day before it: those transactions count as they happened, unreplayed.
  const lookbackFrom = new Date(window.from.getTime() - 24 * HOUR_MS);
  const size =
    (await em.count(OutgoingTransaction, transactionFilter(scope, lookbackFrom, window.to))) +
    (window.includeRefused ? await em.count(PolicyAuditLog, refusalFilter(scope, window.from, window.to)) : 0);
  if (size > HISTORY_REPLAY_MAX) {
    throw errors.invalid('simulation_window_too_large', `The window holds ${size} past requests; at most ${HISTORY_REPLAY_MAX} are replayed. Narrow the window.`, {
      param: 'history',
      details: { past_requests: size, limit: HISTORY_REPLAY_MAX },
    });
  }

  const sets = await whatIfPolicySets(em, policy);
  const ruleNames = new Map([...sets.current, ...sets.whatIf].flatMap((p) => p.rules.map((rule) => [rule.id, rule.name] as const)));
  const draftReplay = new Replay(sets.whatIf);
  const currentReplay = new Replay(sets.current);

  const draftCounts = perOutcome(() => 0);
  const actualCounts = perOutcome(() => 0);
  const transitions = perOutcome(() => perOutcome(() => 0));
  const examples = perOutcome(() => ({ changed: [] as HistoryExample[], unchanged: [] as HistoryExample[] }));
  let [total, transactions, refused, changed, changedFromCurrent, unpriced] = [0, 0, 0, 0, 0, 0];
  let [stopped, released] = [new Money(0), new Money(0)];

  // The lookback starts the transaction stream; refusals start at `from`.
  for await (const past of pastRequests(em, scope, lookbackFrom, window.to, window.includeRefused)) {
    if (past.at < window.from) {
      draftReplay.happened(past);
      currentReplay.happened(past);
      continue;
    }
    // Every wallet's requests are replayed, since velocity is organization-wide; the report covers the wallet asked for.
    // The address book as it is now: the replay asks what the draft would do with today's entries.
    const context = await evaluationContext(em, { organizationId: scope.organization, environment: scope.environment }, [...sets.current, ...sets.whatIf], past.request);
    const draft = draftReplay.decide(past, context);
    const current = currentReplay.decide(past, context);
    if (window.walletId && past.walletId !== window.walletId) continue;

    total += 1;
    if (past.transaction) transactions += 1;
    else refused += 1;
    const actual = past.actual.outcome;
    draftCounts[draft.outcome] += 1;
    actualCounts[actual] += 1;
    transitions[actual][draft.outcome] += 1;
    if (draft.outcome !== current.outcome) changedFromCurrent += 1;
    const isChange = draft.outcome !== actual;
    if (isChange) changed += 1;
    // Stopped: value that actually left (a failed send moved nothing) and the draft would have kept. Released: the reverse.
    const stops = actual === 'allowed' && past.transaction?.status !== 'failed' && draft.outcome !== 'allowed';
    const releases = actual !== 'allowed' && draft.outcome === 'allowed';
    if (stops || releases) {
      if (!past.amountUsd) unpriced += 1;
      else if (stops) stopped = stopped.plus(past.amountUsd);
      else released = released.plus(past.amountUsd);
    }
    const bucket = examples[draft.outcome][isChange ? 'changed' : 'unchanged'];
    if (bucket.length < exampleLimit) bucket.push(exampleOf(past, draft, ruleNames));
  }

  return {
    object: 'policy_history_simulation' as const,
    policy_id: policy.id,
    window: {
      from: window.from.toISOString(),
      to: window.to.toISOString(),
      wallet_id: window.walletId ?? null,
      include_refused: window.includeRefused,
    },
    total,
    transactions,
    refused_requests: refused,
    ...draftCounts,
    actual: actualCounts,
    transitions,
    changed,
    changed_from_current: changedFromCurrent,
    usd: { stopped: stopped.toFixed(), released: released.toFixed(), unpriced_changes: unpriced },
    // Per outcome under the draft: the changed requests first, in time order, then unchanged ones.
    examples: Object.fromEntries(OUTCOMES.map((outcome) => [outcome, [...examples[outcome].changed, ...examples[outcome].unchanged].slice(0, exampleLimit)])) as Record<
      Outcome,
      HistoryExample[]
    >,
  };
}
