import type { EntityManager } from '@mikro-orm/postgresql';
import { addressBookEntryIdsOf } from '../address-book/service';
import { afterTransaction } from '../db/after-transaction';
import { sql } from '../db/lean';
import { DomainError } from '../shared/errors';
import { prefixedId } from '../shared/ids';
import { Policy } from './entities';
import { evaluatePolicies, outcomeOf, type EvaluablePolicy, type EvaluationContext, type EvaluationRequest, type EvaluationResult, type Outcome } from './evaluator';
import type { HoldOutcome } from './held-sends';
import { canonicalRequestAddresses } from './addresses';
import { isAddressBookOperator } from './schema';
import { findPolicy, recordPolicyEvent, type PolicyActor, type PolicyScope } from './service';

/**
 * Evaluation and the sending decision: the enforced policies of a scope as the evaluator reads
 * them, a movement judged against them (decideTransaction, which the movement gate calls), its
 * audit, and what-if simulation of a draft.
 */
export function toEvaluable(policy: Policy): EvaluablePolicy {
  return {
    id: policy.id,
    category: policy.category,
    priority: policy.priority,
    rules: policy.rules.getItems().map((rule) => ({
      id: rule.id,
      name: rule.name,
      order: rule.order,
      actionType: rule.actionType,
      actionConfig: rule.actionConfig,
      conditions: rule.conditions,
    })),
  };
}

/**
 * What evaluating `request` under `policies` needs beyond the request: the address-book entries
 * listing its destination, read now (so a deleted entry no longer matches), and only when a
 * condition tests the address book.
 */
export async function evaluationContext(
  em: EntityManager,
  scope: PolicyScope,
  policies: readonly EvaluablePolicy[],
  request: EvaluationRequest,
): Promise<EvaluationContext> {
  const usesBook = policies.some((policy) => policy.rules.some((rule) => rule.conditions.some((condition) => isAddressBookOperator(condition.operator))));
  const { chain, to_address: toAddress } = request;
  if (!usesBook || typeof chain !== 'string' || typeof toAddress !== 'string') return {};
  return { addressBookEntryIds: await addressBookEntryIdsOf(em, scope, chain, toAddress) };
}

/** Dry run: the enforced policies (or `policyId` in any state) against `request`; nothing is recorded. */
export async function evaluate(em: EntityManager, scope: PolicyScope, request: EvaluationRequest, policyId?: string): Promise<EvaluationResult> {
  const policies = (policyId ? [await findPolicy(em, scope, policyId)] : await enforcedPolicies(em, scope)).map(toEvaluable);
  // The request's addresses as a send carries them, so that the dry run decides what sending would.
  const canonical = canonicalRequestAddresses(request, scope.environment);
  return evaluatePolicies(policies, canonical, await evaluationContext(em, scope, policies, canonical));
}

/** The organization's enforced policies of one environment, in evaluation order (priority, then oldest first). */
export async function enforcedPolicies(em: EntityManager, scope: PolicyScope): Promise<Policy[]> {
  return em.find(Policy, { organization: scope.organizationId, environment: scope.environment, status: 'enforced' }, { populate: ['rules'], orderBy: { priority: 'asc', createdAt: 'asc', id: 'asc' } });
}

/**
 * The enforced policies as `enforcedPolicies` orders them, read for evaluation only: one statement
 * (rules aggregated in it), no entity made. The movement gate reads them on every movement.
 */
async function enforcedEvaluables(em: EntityManager, scope: PolicyScope): Promise<EvaluablePolicy[]> {
  const rows = await sql<{ policy: string }>(
    em,
    `select json_build_object('id', p.id, 'category', p.category, 'priority', p.priority, 'rules', coalesce((
              select json_agg(json_build_object('id', r.id, 'name', r.name, 'order', r.position, 'actionType', r.action_type, 'actionConfig', r.action_config, 'conditions', r.conditions) order by r.position)
                from policy_rules r where r.policy_id = p.id), '[]'::json))::text as policy
       from policies p where p.organization_id = $1 and p.environment = $2 and p.status = 'enforced'
      order by p.priority, p.created_at, p.id`,
    [scope.organizationId, scope.environment],
  );
  return rows.map((row) => JSON.parse(row.policy) as EvaluablePolicy);
}

/**
 * A decision's audit entry, as writeAudit writes one, by one statement of `em`: in the caller's
 * transaction, or outside any (a fork's, on the statement pool, once the refused request's
 * transaction has released its connection: holding it while waiting for a second one, a burst of
 * refusals held every connection and waited out the pool's timeout, issue 53).
 */
async function auditDecision(em: EntityManager, actor: PolicyActor, policyId: string | null, metadata: Record<string, unknown>): Promise<void> {
  await sql(
    em,
    `insert into policy_audit_logs (id, organization_id, environment, policy_id, action, actor_id, actor_name, changes, metadata, created_at)
     values ($1, $2, $3, $4, 'decision', $5, $6, '{}', $7::jsonb, $8)`,
    [prefixedId('pal'), actor.organizationId, actor.environment, policyId, actor.id, actor.name, JSON.stringify({ actor_type: actor.type, ...metadata }), new Date()],
  );
}

/**
 * What the movement gate calls before every movement (spec rule 3). Allowed: returns the request
 * as decided and the evaluation (an alert rule also records policy.alert in the caller's
 * transaction). Refused: throws policy_blocked (403), policy_approval_required or
 * policy_delay_required (400). `addFields` completes the request once the enforced policies are
 * known (the velocity fields, read under a lock only policies that test them need). Every decision
 * is written to the audit log with the actor; a refusal's entry is committed on its own after the
 * refused request's transaction has rolled back (the refusal carries that write as `settling`).
 */
export async function decideTransaction(
  em: EntityManager,
  fields: EvaluationRequest,
  actor: PolicyActor,
  options: {
    resolveHold?: (evaluation: EvaluationResult) => Promise<HoldOutcome>;
    addFields?: (policies: readonly EvaluablePolicy[]) => Promise<EvaluationRequest>;
    namedAllowRequired?: boolean;
  } = {},
): Promise<{ request: EvaluationRequest; evaluation: EvaluationResult }> {
  // Only the policies of the request's environment (the actor's): a live policy never decides a sandbox request, nor the reverse.
  const policies = await enforcedEvaluables(em, actor);
  const request = options.addFields ? { ...fields, ...(await options.addFields(policies)) } : fields;
  const context = { ...(await evaluationContext(em, actor, policies, request)), namedAllowRequired: options.namedAllowRequired };
  let evaluation = evaluatePolicies(policies, request, context);
  // A hold the caller can resolve: an approval of this very send admits it, else the refusal names the request it waits on.
  let hold: HoldOutcome | undefined;
  if (!evaluation.allowed && evaluation.requires_approval && options.resolveHold) {
    hold = await options.resolveHold(evaluation);
    if ('admittedBy' in hold) evaluation = { ...evaluation, allowed: true, result: 'approved', reason: `Approved by approval request ${hold.admittedBy}` };
  }
  const { trace: _trace, ...decision } = evaluation;
  if (evaluation.allowed) {
    const metadata = { decision, request, ...(hold && 'admittedBy' in hold ? { approval_request_id: hold.admittedBy } : {}) };
    await auditDecision(em, actor, evaluation.policy_id, metadata);
    const matched = evaluation.trace?.find((entry) => entry.terminal);
    if (matched?.action === 'alert') {
      await recordPolicyEvent(em, {
        organizationId: actor.organizationId,
        type: 'policy.alert',
        actor,
        data: { policy_id: evaluation.policy_id, rule_id: evaluation.rule_id, rule_name: matched.rule_name, request },
      });
    }
    return { request, evaluation };
  }
  const refused = refusal(evaluation);
  const awaitedRequest = hold && 'awaitedRequest' in hold ? hold.awaitedRequest : undefined;
  const audit = async () => {
    // The approval request the held send waits on, named in the refusal and its audit entry.
    const approvalRequestId = awaitedRequest ? await awaitedRequest() : undefined;
    if (approvalRequestId) refused.details.approval_request_id = approvalRequestId;
    await auditDecision(em.fork(), actor, evaluation.policy_id, { decision, request, ...(approvalRequestId ? { approval_request_id: approvalRequestId } : {}) });
  };
  // Outside any transaction nothing is held: written before the refusal is thrown.
  if (!em.getTransactionContext()) await audit();
  else {
    const audited = afterTransaction(em, audit);
    // Waited for by whoever answers the refusal (the HTTP error handler, the activity interceptor); never unhandled.
    audited.catch(() => undefined);
    refused.settling = audited;
  }
  throw refused;
}

/** The refusal of a decision; a held send's names the approval request it waits on once that is known (decideTransaction). */
function refusal(evaluation: EvaluationResult): DomainError {
  const ids = { policy_id: evaluation.policy_id, rule_id: evaluation.rule_id };
  if (evaluation.result === 'delayed') {
    return new DomainError({ kind: 'invalid', code: 'policy_delay_required', message: evaluation.reason, details: { ...ids, delay_minutes: evaluation.delay_minutes } });
  }
  if (evaluation.requires_approval) {
    return new DomainError({
      kind: 'invalid',
      code: 'policy_approval_required',
      message: evaluation.reason,
      details: {
        ...ids,
        required_approvals: evaluation.required_approvals,
        expiry_hours: evaluation.expiry_hours,
      },
    });
  }
  return new DomainError({ kind: 'forbidden', code: 'policy_blocked', message: evaluation.reason, details: ids });
}

/**
 * The two policy sets a what-if compares: the organization's enforced policies now, and the same
 * with `policy` enforced in its place (the enforced policy it replaces, and itself, taken out).
 */
export async function whatIfPolicySets(em: EntityManager, policy: Policy): Promise<{ current: EvaluablePolicy[]; whatIf: EvaluablePolicy[] }> {
  const current = (await enforcedPolicies(em, { organizationId: policy.organization.id, environment: policy.environment })).map(toEvaluable);
  const replaced = new Set([policy.id, policy.sourcePolicy?.id]);
  return { current, whatIf: [...current.filter((p) => !replaced.has(p.id)), toEvaluable(policy)] };
}

/** What-if over explicit requests: each evaluated under `whatIfPolicySets`. Nothing is written. */
export async function simulatePolicy(em: EntityManager, policy: Policy, requests: EvaluationRequest[], exampleLimit: number) {
  const { current, whatIf } = await whatIfPolicySets(em, policy);
  const counts: Record<Outcome, number> = { allowed: 0, blocked: 0, held_for_approval: 0, delayed: 0 };
  const examples: Record<Outcome, { index: number; result: EvaluationResult['result']; rule_id: string | null; reason: string }[]> = {
    allowed: [],
    blocked: [],
    held_for_approval: [],
    delayed: [],
  };
  const scope = { organizationId: policy.organization.id, environment: policy.environment };
  let changed = 0;
  for (const [index, request] of requests.entries()) {
    const context = await evaluationContext(em, scope, [...current, ...whatIf], request);
    const evaluation = evaluatePolicies(whatIf, request, context);
    const outcome = outcomeOf(evaluation);
    counts[outcome] += 1;
    if (examples[outcome].length < exampleLimit) examples[outcome].push({ index, result: evaluation.result, rule_id: evaluation.rule_id, reason: evaluation.reason });
    if (outcome !== outcomeOf(evaluatePolicies(current, request, context))) changed += 1;
  }
  return { object: 'policy_simulation' as const, policy_id: policy.id, total: requests.length, ...counts, changed_from_current: changed, examples };
}

// ---------- activation ----------

