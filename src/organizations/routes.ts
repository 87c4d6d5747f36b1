import type { RouteRegistry } from '../http/route';
import { ListQuery, listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { Member, Role } from './entities';
import { MemberObject, RoleObject } from './schemas';
import { presentMember, presentRole } from './service';

/** Members and roles as they are; adding a member is a governance change (policies/governance-routes.ts). */
export function registerOrganizationRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'get',
    path: '/v1/members',
    operationId: 'listMembers',
    summary: 'List members',
    tag: 'Members and roles',
    scope: 'api_keys:admin',
    query: ListQuery,
    response: { status: 200, description: 'A page of members, newest first', schema: listEnvelopeSchema(MemberObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, Member, { organization: auth.organizationId }, query, ['roles']);
      return { body: listBody(page, presentMember) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/roles',
    operationId: 'listRoles',
    summary: 'List roles with their member counts',
    tag: 'Members and roles',
    scope: 'api_keys:admin',
    query: ListQuery,
    response: { status: 200, description: 'A page of roles, newest first', schema: listEnvelopeSchema(RoleObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, Role, { organization: auth.organizationId }, query);
      const counts = new Map<string, number>();
      if (page.items.length) {
        const rows = await em.getConnection().execute<{ role_id: string; count: string }[]>(
          `select role_id, count(*) as count from member_roles where role_id in (${page.items.map(() => '?').join(',')}) group by role_id`,
          page.items.map((role) => role.id),
        );
        for (const row of rows) counts.set(row.role_id, Number(row.count));
      }
      return { body: listBody(page, (role) => presentRole(role, counts.get(role.id) ?? 0)) };
    },
  });
}
