import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { GasStation } from '../src/gas-stations/entities';
import { limitChangesOf, setStationLimits } from '../src/gas-stations/limit-changes';
import { Member, Organization } from '../src/organizations/entities';
import { applySettings, createMember } from '../src/organizations/service';
import type { GovernanceChange } from '../src/policies/entities';
import { newMemberOf, settingsPatchOf } from '../src/policies/governance';
import { archivePolicy, type PolicyActor } from '../src/policies/service';

/**
 * What an approved change request applies, by its kind, in the transaction that closes the request
 * (activities/policies.ts). Each is idempotent: applied twice, the control ends as applied once.
 * `actor` is the member whose vote decided.
 */
export async function applyChange(em: EntityManager, change: GovernanceChange, actor: PolicyActor): Promise<void> {
  switch (change.kind) {
    case 'policy_archived':
      await archivePolicy(em, actor, change.subject.policy_id!);
      return;
    case 'gas_station_limits_raised': {
      const station = await em.findOneOrFail(GasStation, { id: change.subject.gas_station_id!, organization: change.organization.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      setStationLimits(station, limitChangesOf(change));
      return;
    }
    case 'approvals_lowered':
    case 'cooling_shortened':
      applySettings(await em.findOneOrFail(Organization, { id: change.organization.id }, { lockMode: LockMode.PESSIMISTIC_WRITE }), settingsPatchOf(change));
      return;
    case 'approver_added':
      change.subject = { ...change.subject, member_id: (await addApprover(em, change)).id };
      return;
    default:
      // Tightening kinds (and activations) are applied where they are asked for: none has a change request.
      throw new Error(`A ${change.kind} change has no change request to apply`);
  }
}

/** The member the change adds, as added by its requester; one who became a member meanwhile (the operator's CLI) is left as they are. */
async function addApprover(em: EntityManager, change: GovernanceChange): Promise<Member> {
  const organization = await em.findOneOrFail(Organization, { id: change.organization.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  const input = newMemberOf(change);
  const existing = await em.findOne(Member, { organization, email: input.email });
  if (existing) return existing;
  const creator = change.requestedByKeyId ? { apiKeyId: change.requestedByKeyId, memberId: change.requestedByType === 'user' ? change.requestedById : null } : undefined;
  return createMember(em, organization, input, creator);
}
