import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ENVIRONMENTS, type ApiKey } from '../api-keys/entities';
import { Member, Organization } from '../organizations/entities';
import {
  applySettings,
  checkNewMember,
  createMember,
  patchOf,
  presentSettings,
  settingChanges,
  type MemberCreator,
  type NewMember,
  type SettingChange,
  type SettingsPatch,
} from '../organizations/service';
import { DomainError } from '../shared/errors';
import { isApprovingRole, requesterOf } from './approvals';
import { announceApplied, applyNow, assertNoPendingChange, proposeLoosening, type ChangeOptions, type ChangeOutcome } from './change-requests';
import type { GovernanceChange, GovernanceChangeKind } from './entities';
import { logChange, operatorRequester, type ChangeProposal } from './governance-log';
import { resolveActor, type Caller, type PolicyActor } from './service';

/**
 * The organization's governance settings and its approvers, changed as governance changes: fewer
 * approvals, a shorter cooling period or one more member who can vote loosen the controls (a change
 * request); more approvals or a longer cooling period tighten them (at once).
 */

/** A setting's change, by the direction it moves the control. */
const settingKind = (change: SettingChange): GovernanceChangeKind =>
  change.field === 'policy_activation_required_approvals'
    ? change.to < change.from ? 'approvals_lowered' : 'approvals_raised'
    : change.to < change.from ? 'cooling_shortened' : 'cooling_lengthened';

const LOOSENING_SETTINGS: readonly GovernanceChangeKind[] = ['approvals_lowered', 'cooling_shortened'];

/** The changes of a settings patch, one proposal per kind (a live and a sandbox cooling change of one direction go together). */
function settingProposals(organization: Organization, patch: SettingsPatch): ChangeProposal[] {
  const byKind = new Map<GovernanceChangeKind, SettingChange[]>();
  for (const change of settingChanges(organization, patch)) byKind.set(settingKind(change), [...(byKind.get(settingKind(change)) ?? []), change]);
  return [...byKind].map(([kind, settings]) => ({ kind, environment: null, subject: { organization_id: organization.id }, change: { settings } }));
}

/** What a settings proposal sets. */
export const settingsPatchOf = (change: Pick<GovernanceChange, 'change'>): SettingsPatch => patchOf(change.change.settings as SettingChange[]);

export type SettingsOutcome = { settings: ReturnType<typeof presentSettings>; pending?: Extract<ChangeOutcome, { status: 'pending' }> };

/**
 * `PATCH /v1/organization/settings`: raising the count and lengthening the cooling period apply at
 * once; lowering the count or shortening the cooling period is a change request (one at a time:
 * both in one patch is 400 `one_loosening_per_request`, as each is a request of its own).
 */
export async function requestSettingsChange(em: EntityManager, actor: PolicyActor, patch: SettingsPatch, options: ChangeOptions): Promise<SettingsOutcome> {
  // Serializes governance changes of the organization: one pending change per kind.
  const organization = await em.findOneOrFail(Organization, { id: actor.organizationId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  const proposals = settingProposals(organization, patch);
  const loosening = proposals.filter((proposal) => LOOSENING_SETTINGS.includes(proposal.kind));
  if (loosening.length > 1) {
    // A business rule, not a malformed request: a named code.
    throw new DomainError({
      kind: 'invalid',
      code: 'one_loosening_per_request',
      message: 'Lowering the approval count and shortening the cooling period are two change requests: send them one at a time.',
      details: { kinds: loosening.map((candidate) => candidate.kind) },
    });
  }
  for (const proposal of proposals.filter((candidate) => !loosening.includes(candidate))) {
    await applyNow(em, actor, proposal, async () => applySettings(organization, settingsPatchOf(proposal)));
  }
  const [proposal] = loosening;
  if (!proposal) return { settings: presentSettings(organization) };
  await assertNoPendingChange(em, organization.id, [proposal.kind]);
  const outcome = await proposeLoosening(em, actor, proposal, options, async () => applySettings(organization, settingsPatchOf(proposal)));
  return { settings: presentSettings(organization), ...(outcome.status === 'pending' ? { pending: outcome } : {}) };
}

/** `org:configure`: the operator's direct path, every change applied, logged with actor `operator` and announced. In the caller's transaction. */
export async function configureByOperator(em: EntityManager, organization: Organization, patch: SettingsPatch): Promise<void> {
  for (const proposal of settingProposals(organization, patch)) {
    applySettings(organization, settingsPatchOf(proposal));
    await announceByOperator(em, logChange(em, operatorRequester(organization.id), proposal, 'applied'));
  }
}

/**
 * A change the operator's CLI applied, announced as the API's are (`policy.changed`): in its
 * environment, or in both when it is organization-wide (settings, members), so that every
 * environment's webhooks hear of a control changed outside the API.
 */
async function announceByOperator(em: EntityManager, change: GovernanceChange): Promise<void> {
  for (const environment of change.environment ? [change.environment] : ENVIRONMENTS) {
    await announceApplied(em, { organizationId: change.organization.id, environment, id: 'operator', name: 'operator', type: 'system' }, change);
  }
}

export type MemberOutcome = { status: 'created'; member: Member } | Extract<ChangeOutcome, { status: 'pending' }>;

/** A proposal to add a member who can vote (owner, admin or approver). */
const approverProposal = (input: NewMember): ChangeProposal => ({
  kind: 'approver_added',
  environment: null,
  subject: { email: input.email.toLowerCase() },
  change: { member: { name: input.name, email: input.email.toLowerCase(), org_role: input.org_role, role_ids: input.role_ids ?? [] } },
});

/** The member an approved `approver_added` change adds. */
export const newMemberOf = (change: Pick<GovernanceChange, 'change'>): NewMember => change.change.member as NewMember;

/**
 * `POST /v1/members`: a viewer is added at once; a member who can vote (owner, admin, approver)
 * adds a voice to every quorum, so the addition is a change request. The member is added as by
 * the requester, whose requests they then cannot vote on (docs/policies.md).
 */
export async function requestMember(em: EntityManager, actor: PolicyActor, creator: MemberCreator, input: NewMember, options: ChangeOptions): Promise<MemberOutcome> {
  const organization = await em.findOneOrFail(Organization, { id: actor.organizationId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (!isApprovingRole(input.org_role)) return { status: 'created', member: await createMember(em, organization, input, creator) };
  // Checked now, so that the approved change can always be applied.
  await checkNewMember(em, organization, input);
  const proposal = approverProposal(input);
  await assertNoPendingChange(em, organization.id, ['approver_added'], proposal.subject);
  let added: Member | undefined;
  const outcome = await proposeLoosening(em, actor, proposal, options, async () => {
    added = await createMember(em, organization, input, creator);
    proposal.subject.member_id = added.id;
  });
  return outcome.status === 'pending' ? outcome : { status: 'created', member: added! };
}

/** `member:create`: the operator adds any member directly; one who can vote is logged with actor `operator`. */
export async function addMemberByOperator(em: EntityManager, organization: Organization, input: NewMember): Promise<Member> {
  const member = await createMember(em, organization, input);
  if (isApprovingRole(input.org_role)) {
    const proposal = approverProposal(input);
    proposal.subject.member_id = member.id;
    await announceByOperator(em, logChange(em, operatorRequester(organization.id), proposal, 'applied'));
  }
  return member;
}

/** A key revoked (instant, as every tightening): logged with who revoked it, in the revocation's transaction. */
export async function logKeyRevocation(em: EntityManager, key: ApiKey, revokedBy: Caller): Promise<void> {
  const proposal: ChangeProposal = {
    kind: 'api_key_revoked',
    environment: key.environment,
    subject: { api_key_id: key.id },
    change: { name: key.name, member_id: key.member?.id ?? null },
  };
  logChange(em, requesterOf(await resolveActor(em, revokedBy)), proposal, 'applied');
}
