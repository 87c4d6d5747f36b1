import { createHash } from 'node:crypto';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { emit } from '../events/service';
import { Organization } from '../organizations/entities';
import { canonicalJson } from '../shared/canonical-json';
import { recordStart } from '../temporal/starter';
import { ApprovalRequest, PolicyRule } from './entities';
import type { EvaluationResult } from './evaluator';
import { transactionApprovalFlow } from './flows/transaction-approval';
import { presentApprovalRequest } from './presenters';
import { approverDirectory, writeAudit, type PolicyActor } from './service';

/**
 * Sends a `require_approval` rule holds (issue 35): the hold opens an approval request bound to the
 * send as asked, its digest; approvers vote on it under the rule's count and approvers; once it is
 * approved, the identical send (same fields, same Idempotency-Key) passes the gate once before
 * expires_at, and consumes it. Any change is another digest: held again, with its own request.
 */

/** A send as its caller asked it, and the id it will have if it passes. */
export interface HeldSendSubject {
  digest: string;
  request: Record<string, unknown>;
  transactionId: string;
}

/**
 * The subject of a send asked through the API: the request body as validated (wallet, asset,
 * destination, amount, fee settings, coin control, note) with the Idempotency-Key, hashed in
 * canonical JSON so that key order does not matter and any changed field does.
 */
export function heldSendSubject(request: Record<string, unknown>, idempotencyKey: string | null, transactionId: string): HeldSendSubject {
  const digest = createHash('sha256').update(canonicalJson({ request, idempotency_key: idempotencyKey })).digest('hex');
  return { digest, request, transactionId };
}

/**
 * What became of a held send: the approval that admits it (consumed now), or the approval request it
 * waits on, found or opened by `awaitedRequest` once the refused send's transaction has ended.
 */
export type HoldOutcome = { admittedBy: string } | { awaitedRequest: () => Promise<string> };

/**
 * Resolves a hold of `subject` by `evaluation`'s rule. An approved, unused, unexpired request of the
 * same digest and rule is consumed in the caller's transaction (row-locked: two identical sends
 * cannot both use it; a send that fails later rolls the consumption back). Otherwise the pending
 * request of that digest and rule is reused, or a new one opened, in a transaction of its own (the
 * refused send's rolls back), run by the caller after that transaction has released its connection:
 * a request holding one while it waits for a second is what emptied the pool under bursts (issue 53).
 */
export async function resolveHeldSend(em: EntityManager, actor: PolicyActor, subject: HeldSendSubject, evaluation: EvaluationResult): Promise<HoldOutcome> {
  const scope = { organization: actor.organizationId, environment: actor.environment, transactionDigest: subject.digest, heldByRuleId: evaluation.rule_id };
  const now = new Date();
  const approved = await em.findOne(
    ApprovalRequest,
    { ...scope, status: 'approved', consumedAt: null, expiresAt: { $gt: now } },
    { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { createdAt: 'asc', id: 'asc' } },
  );
  if (approved) {
    approved.consumedAt = now;
    approved.consumedByTransactionId = subject.transactionId;
    writeAudit(em, { actor, policyId: evaluation.policy_id, action: 'transaction_approval_used', metadata: { approval_request_id: approved.id, transaction_id: subject.transactionId } });
    return { admittedBy: approved.id };
  }
  return { awaitedRequest: () => awaitedApprovalRequest(em.fork(), actor, subject, evaluation, now) };
}

/** The pending approval request of a held send, reused or opened in a transaction of its own: its id. */
async function awaitedApprovalRequest(em: EntityManager, actor: PolicyActor, subject: HeldSendSubject, evaluation: EvaluationResult, now: Date): Promise<string> {
  const scope = { organization: actor.organizationId, environment: actor.environment, transactionDigest: subject.digest, heldByRuleId: evaluation.rule_id };
  return em.transactional(async (own) => {
    // One pending request per send, however many identical requests arrive at once.
    await own.execute('select pg_advisory_xact_lock(hashtext(?))', [`held-send:${actor.organizationId}:${actor.environment}:${subject.digest}`]);
    const pending = await own.findOne(ApprovalRequest, { ...scope, status: 'pending', expiresAt: { $gt: now } }, { orderBy: { createdAt: 'desc', id: 'desc' } });
    if (pending) return pending.id;
    return (await openHeldSendRequest(own, actor, subject, evaluation)).id;
  });
}

async function openHeldSendRequest(em: EntityManager, actor: PolicyActor, subject: HeldSendSubject, evaluation: EvaluationResult): Promise<ApprovalRequest> {
  const rule = await em.findOneOrFail(PolicyRule, { id: evaluation.rule_id! });
  const directory = await approverDirectory(em, actor.organizationId);
  const approvers = (rule.actionConfig.approvers as { id: string }[] | undefined) ?? [];
  const approverMemberIds = [...new Set(approvers.flatMap((approver) => directory.get(approver.id) ?? []))];
  const request = em.create(ApprovalRequest, {
    organization: em.getReference(Organization, actor.organizationId),
    environment: actor.environment,
    transactionDigest: subject.digest,
    transactionRequest: subject.request,
    heldByPolicyId: evaluation.policy_id,
    heldByRuleId: evaluation.rule_id,
    approverMemberIds,
    requestedBy: actor.id,
    requestedByKeyId: actor.apiKeyId ?? null,
    requestedByName: actor.name,
    comment: evaluation.reason,
    requiredApprovals: evaluation.required_approvals ?? 1,
    expiresAt: new Date(Date.now() + (evaluation.expiry_hours ?? 24) * 3_600_000),
    createdAt: new Date(),
  });
  writeAudit(em, {
    actor,
    policyId: evaluation.policy_id,
    action: 'transaction_approval_requested',
    metadata: { approval_request_id: request.id, rule_id: evaluation.rule_id, required_approvals: request.requiredApprovals, expires_at: request.expiresAt.toISOString() },
  });
  await emit(em, { organizationId: actor.organizationId, environment: actor.environment, type: 'approval_request.created', data: presentApprovalRequest(request) });
  // Fired by the start sweep, or by the first vote (castVote ensures the start): the refused send's transaction fires nothing.
  recordStart(
    em,
    transactionApprovalFlow,
    {
      approvalRequestId: request.id,
      organizationId: actor.organizationId,
      requesterId: actor.id,
      requiredApprovals: request.requiredApprovals,
      expiresAt: request.expiresAt.toISOString(),
    },
    actor.organizationId,
  );
  return request;
}
