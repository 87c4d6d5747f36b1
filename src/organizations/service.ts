import type { EntityManager } from '@mikro-orm/postgresql';
import { errors } from '../shared/errors';
import { isUuid, prefixedId } from '../shared/ids';
import { iso } from '../shared/time';
import { Member, ORG_ROLES, type OrgRole, Organization, Role } from './entities';

const BUILT_IN_ROLE_DESCRIPTIONS: Record<OrgRole, string> = {
  owner: 'Every member with org_role owner',
  admin: 'Every member with org_role admin',
  approver: 'Every member with org_role approver',
  viewer: 'Every member with org_role viewer',
};

/** A new organization with one built-in role per org_role, so approvals can name a role from day one. */
export function createOrganization(em: EntityManager, name: string): Organization {
  const organization = em.create(Organization, { name, createdAt: new Date() });
  for (const orgRole of ORG_ROLES) {
    em.create(Role, {
      id: prefixedId('role'),
      organization,
      name: orgRole,
      description: BUILT_IN_ROLE_DESCRIPTIONS[orgRole],
      builtIn: true,
      createdAt: new Date(),
    });
  }
  return organization;
}

export function createRole(em: EntityManager, organization: Organization, name: string, description = ''): Role {
  return em.create(Role, { id: prefixedId('role'), organization, name, description, builtIn: false, createdAt: new Date() });
}

export interface NewMember {
  name: string;
  email: string;
  org_role: OrgRole;
  role_ids?: string[];
}

/** Who adds a member: the calling key and the member it acts for; absent for the operator (CLI). */
export interface MemberCreator {
  apiKeyId: string;
  memberId: string | null;
}

/** The roles a new member joins (its org_role's and the custom ones named), once its email is free: 409 `member_exists`, 404 on an unknown role. */
export async function checkNewMember(em: EntityManager, organization: Organization, input: NewMember): Promise<Role[]> {
  const email = input.email.toLowerCase();
  if (await em.count(Member, { organization, email })) {
    throw errors.conflict('member_exists', `A member with email '${email}' already exists in this organization.`);
  }
  const builtIn = await em.findOneOrFail(Role, { organization, name: input.org_role, builtIn: true });
  const extra = input.role_ids?.length ? await em.find(Role, { organization, id: { $in: input.role_ids }, builtIn: false }) : [];
  const missing = (input.role_ids ?? []).filter((id) => !extra.some((role) => role.id === id));
  if (missing.length) throw errors.notFound('role', missing[0]!, 'role_ids');
  return [builtIn, ...extra];
}

export async function createMember(em: EntityManager, organization: Organization, input: NewMember, creator?: MemberCreator): Promise<Member> {
  const roles = await checkNewMember(em, organization, input);
  const member = em.create(Member, {
    organization,
    name: input.name,
    email: input.email.toLowerCase(),
    orgRole: input.org_role,
    createdByKeyId: creator?.apiKeyId ?? null,
    createdByMemberId: creator?.memberId ?? null,
    createdAt: new Date(),
  });
  member.roles.set(roles);
  return member;
}

export async function findMember(em: EntityManager, organizationId: string, id: string, param = 'id'): Promise<Member> {
  const member = isUuid(id) ? await em.findOne(Member, { id, organization: organizationId }, { populate: ['roles'] }) : null;
  if (!member) throw errors.notFound('member', id, param);
  return member;
}

export function presentMember(member: Member) {
  return {
    id: member.id,
    object: 'member' as const,
    organization_id: member.organization.id,
    name: member.name,
    email: member.email,
    org_role: member.orgRole,
    role_ids: member.roles.isInitialized() ? member.roles.getItems().map((role) => role.id) : [],
    created_at: iso(member.createdAt),
  };
}

export function presentRole(role: Role, memberCount: number) {
  return {
    id: role.id,
    object: 'role' as const,
    organization_id: role.organization.id,
    name: role.name,
    description: role.description,
    built_in: role.builtIn,
    member_count: memberCount,
    created_at: iso(role.createdAt),
  };
}

/** The organization's governance settings, as the API and the CLI show them. */
export interface OrganizationSettings {
  policy_activation_required_approvals: number;
  address_book_cooling_hours: { live: number; sandbox: number };
}

/** Some of the settings, to set. */
export interface SettingsPatch {
  policy_activation_required_approvals?: number | undefined;
  address_book_cooling_hours?: { live?: number | undefined; sandbox?: number | undefined } | undefined;
}

export function presentSettings(organization: Organization): OrganizationSettings {
  return {
    policy_activation_required_approvals: organization.policyActivationRequiredApprovals,
    address_book_cooling_hours: { live: organization.addressBookCoolingHoursLive, sandbox: organization.addressBookCoolingHoursSandbox },
  };
}

export function applySettings(organization: Organization, patch: SettingsPatch): void {
  if (patch.policy_activation_required_approvals !== undefined) organization.policyActivationRequiredApprovals = patch.policy_activation_required_approvals;
  const cooling = patch.address_book_cooling_hours;
  if (cooling?.live !== undefined) organization.addressBookCoolingHoursLive = cooling.live;
  if (cooling?.sandbox !== undefined) organization.addressBookCoolingHoursSandbox = cooling.sandbox;
}

/** One setting changed: what it was and what it becomes. */
export interface SettingChange {
  field: 'policy_activation_required_approvals' | 'address_book_cooling_hours.live' | 'address_book_cooling_hours.sandbox';
  from: number;
  to: number;
}

/** The settings `patch` changes, each with its old value; unchanged ones are left out. */
export function settingChanges(organization: Organization, patch: SettingsPatch): SettingChange[] {
  const current = presentSettings(organization);
  const candidates: [SettingChange['field'], number, number | undefined][] = [
    ['policy_activation_required_approvals', current.policy_activation_required_approvals, patch.policy_activation_required_approvals],
    ['address_book_cooling_hours.live', current.address_book_cooling_hours.live, patch.address_book_cooling_hours?.live],
    ['address_book_cooling_hours.sandbox', current.address_book_cooling_hours.sandbox, patch.address_book_cooling_hours?.sandbox],
  ];
  return candidates.filter(([, from, to]) => to !== undefined && to !== from).map(([field, from, to]) => ({ field, from, to: to! }));
}

/** The patch that sets `changes`. */
export function patchOf(changes: readonly SettingChange[]): SettingsPatch {
  const patch: SettingsPatch = {};
  for (const { field, to } of changes) {
    if (field === 'policy_activation_required_approvals') patch.policy_activation_required_approvals = to;
    else patch.address_book_cooling_hours = { ...patch.address_book_cooling_hours, [field === 'address_book_cooling_hours.live' ? 'live' : 'sandbox']: to };
  }
  return patch;
}
