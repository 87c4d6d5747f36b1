import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AddressBookEntry } from '../src/address-book/entities';
import type { Config } from '../src/config';
import type { Orm } from '../src/db/orm';
import { transactionWithStarts } from './with-starts';
import type { Logger } from '../src/logger';
import { Member } from '../src/organizations/entities';
import { announceDecision, decideApprovalRequest, makeEntryUsable } from '../src/policies/approvals';
import { recordIndependentVote, recordVote, type VoteInput } from '../src/policies/votes';
import type { VoteRecording } from '../src/policies/flows/quorum';
import { ApprovalRequest, GovernanceChange } from '../src/policies/entities';
import { announceApplied } from '../src/policies/change-requests';
import { applyChange } from './governance';
import { enforcePolicy, recordPolicyEvent, systemActor, writeAudit, type PolicyActor } from '../src/policies/service';

export interface PolicyActivityDeps {
  orm: Orm;
  config: Config;
  log: Logger;
}

/** Activities of the approval workflows (policy activation, address-book entry approval, held send); each is idempotent, so a retry changes nothing twice. */
export const createPolicyActivities = (deps: PolicyActivityDeps) => {
  async function memberActor(em: EntityManager, request: ApprovalRequest, memberId: string | undefined): Promise<PolicyActor> {
    const scope = { organizationId: request.organization.id, environment: request.environment };
    const member = memberId ? await em.findOne(Member, { id: memberId }) : null;
    return member ? { ...scope, id: member.id, name: member.name, type: 'user' } : systemActor(scope.organizationId, scope.environment);
  }

  const inTransaction = transactionWithStarts(deps);

  /** The request under its row lock while still pending; null once decided, or gone with the entry it concerned. */
  async function pendingRequest(em: EntityManager, approvalRequestId: string): Promise<ApprovalRequest | null> {
    const request = await em.findOne(ApprovalRequest, { id: approvalRequestId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    return request?.status === 'pending' ? request : null;
  }

  return {
    async recordApprovalVote(input: VoteInput): Promise<boolean> {
      return deps.orm.em.fork().transactional((em) => recordVote(em, input));
    },

    async recordIndependentApprovalVote(input: VoteInput): Promise<VoteRecording> {
      return deps.orm.em.fork().transactional((em) => recordIndependentVote(em, input));
    },

    /** Enforces the policy and closes the request as approved, under row locks, in one transaction. */
    async enforceApprovedPolicy(input: { approvalRequestId: string; decidedBy?: string }): Promise<void> {
      await inTransaction(async (em) => {
        const request = await pendingRequest(em, input.approvalRequestId);
        if (!request) return;
        const actor = await memberActor(em, request, input.decidedBy);
        await enforcePolicy(em, request.policy!.id, actor, { approval_request_id: request.id });
        await decideApprovalRequest(em, request, 'approved');
      });
    },

    /** Makes the entry usable now and closes the request as approved, in one transaction. */
    async makeApprovedEntryUsable(input: { approvalRequestId: string; decidedBy?: string }): Promise<void> {
      await inTransaction(async (em) => {
        const request = await pendingRequest(em, input.approvalRequestId);
        if (!request) return;
        const entry = await em.findOneOrFail(AddressBookEntry, { id: request.addressBookEntry!.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        makeEntryUsable(em, entry, await memberActor(em, request, input.decidedBy), { approval_request_id: request.id });
        await decideApprovalRequest(em, request, 'approved');
      });
    },

    /** Decides a held send's request: approved lets the identical send pass the gate once (policies/held-sends.ts); rejected or expired leaves it held. */
    async closeHeldSendRequest(input: { approvalRequestId: string; status: 'approved' | 'rejected' | 'expired'; decidedBy?: string }): Promise<void> {
      await inTransaction(async (em) => {
        const request = await pendingRequest(em, input.approvalRequestId);
        if (!request) return;
        await decideApprovalRequest(em, request, input.status);
        const metadata = { approval_request_id: request.id, held_by_rule_id: request.heldByRuleId };
        writeAudit(em, { actor: await memberActor(em, request, input.decidedBy), policyId: request.heldByPolicyId ?? null, action: `transaction_approval_${input.status}`, metadata });
      });
    },

    /** At expires_at: an approval no send used ends `expired`; returns whether it did. */
    async expireUnusedSendApproval(input: { approvalRequestId: string }): Promise<boolean> {
      return deps.orm.em.fork().transactional(async (em) => {
        const request = await em.findOne(ApprovalRequest, { id: input.approvalRequestId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        if (request?.status !== 'approved' || request.consumedAt) return false;
        request.status = 'expired';
        const metadata = { approval_request_id: request.id, held_by_rule_id: request.heldByRuleId, unused: true };
        writeAudit(em, { actor: systemActor(request.organization.id, request.environment), policyId: request.heldByPolicyId ?? null, action: 'transaction_approval_expired', metadata });
        await announceDecision(em, request);
        return true;
      });
    },

    /** Applies an approved change request's change and closes the request as approved, under row locks, in one transaction. */
    async applyApprovedChange(input: { approvalRequestId: string; decidedBy?: string }): Promise<void> {
      await inTransaction(async (em) => {
        const request = await pendingRequest(em, input.approvalRequestId);
        if (!request) return;
        const actor = await memberActor(em, request, input.decidedBy);
        const change = await em.findOneOrFail(GovernanceChange, { id: request.governanceChange!.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        await applyChange(em, change, actor);
        await decideApprovalRequest(em, request, 'approved');
        await announceApplied(em, actor, change);
      });
    },

    /** Closes a request that was rejected or lapsed; the policy stays draft, the entry keeps its usable_at, a change is not applied. */
    async closeApprovalRequest(input: { approvalRequestId: string; status: 'rejected' | 'expired'; decidedBy?: string }): Promise<void> {
      await inTransaction(async (em) => {
        const request = await pendingRequest(em, input.approvalRequestId);
        if (!request) return;
        await decideApprovalRequest(em, request, input.status);
        const actor = await memberActor(em, request, input.decidedBy);
        if (request.addressBookEntry) {
          const metadata = { address_book_entry_id: request.addressBookEntry.id, approval_request_id: request.id };
          writeAudit(em, { actor, policyId: null, action: `address_book_entry_approval_${input.status}`, metadata });
          return;
        }
        if (request.governanceChange) {
          const metadata = { governance_change_id: request.governanceChange.id, approval_request_id: request.id };
          writeAudit(em, { actor, policyId: null, action: `change_${input.status}`, metadata });
          return;
        }
        await recordPolicyEvent(em, {
          organizationId: request.organization.id,
          type: input.status === 'rejected' ? 'policy.activation_rejected' : 'policy.activation_expired',
          actor,
          data: { policy_id: request.policy!.id, approval_request_id: request.id },
        });
      });
    },
  };
};
