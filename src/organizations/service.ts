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

export async function createMember(em: EntityManager, organization: Organization, input: NewMember, creator?: MemberCreator): Promise<Member> {
  const email = input.email.toLowerCase();
  if (await em.count(Member, { organization, email })) {
    throw errors.conflict('member_exists', `A member with email '${email}' already exists in this organization.`);
  }
  const builtIn = await em.findOneOrFail(Role, { organization, name: input.org_role, builtIn: true });
  const extra = input.role_ids?.length ? await em.find(Role, { organization, id: { $in: input.role_ids }, builtIn: false }) : [];
  const missing = (input.role_ids ?? []).filter((id) => !extra.some((role) => role.id === id));
  if (missing.length) throw errors.notFound('role', missing[0]!, 'role_ids');
  const member = em.create(Member, {
    organization,
    name: input.name,
    email,
    orgRole: input.org_role,
    createdByKeyId: creator?.apiKeyId ?? null,
    createdByMemberId: creator?.memberId ?? null,
    createdAt: new Date(),
  });
  member.roles.set([builtIn, ...extra]);
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
