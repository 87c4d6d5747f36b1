import type { RouteRegistry } from '../http/route';
import { Organization } from '../organizations/entities';
import { CreateMemberBody, MemberObject } from '../organizations/schemas';
import { presentMember, presentSettings, type OrganizationSettings } from '../organizations/service';
import { listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { presentChangeRequest } from './change-requests';
import { GovernanceChange } from './entities';
import { requestMember, requestSettingsChange } from './governance';
import { presentGovernanceChange, requestsOf } from './governance-log';
import { GovernanceChangeObject, GovernanceLogQuery, OrganizationSettingsObject, PendingChangeObject, PendingSettingsObject, UpdateSettingsBody } from './governance-schemas';
import { resolveActor } from './service';

const settingsBody = (organizationId: string, settings: OrganizationSettings) => ({ object: 'organization_settings' as const, organization_id: organizationId, ...settings });

/** Governance: the log of every change to the controls, the organization's settings and its approvers (docs/policies.md, "Governance"). */
export function registerGovernanceRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'get',
    path: '/v1/governance/log',
    operationId: 'listGovernanceLog',
    summary: 'Every governance change, newest first: who asked, who approved, when it took effect',
    description:
      "Policy activations and archives, gas-station limits, the approval count, the cooling period and approvers added, in the key's environment " +
      'and organization-wide (environment null). Filters status and kind.',
    tag: 'Policies',
    scope: 'policies:read',
    query: GovernanceLogQuery,
    response: { status: 200, description: 'A page of governance changes', schema: listEnvelopeSchema(GovernanceChangeObject) },
    handler: async ({ auth, em, query }) => {
      const where = {
        organization: auth.organizationId,
        $or: [{ environment: auth.environment }, { environment: null }],
        ...(query.status ? { status: query.status } : {}),
        ...(query.kind ? { kind: query.kind } : {}),
      };
      const page = await paginate(em, GovernanceChange, where, query);
      const requests = await requestsOf(em, page.items);
      return { body: listBody(page, (change) => presentGovernanceChange(change, change.approvalRequestId ? requests.get(change.approvalRequestId) : undefined)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/organization/settings',
    operationId: 'getOrganizationSettings',
    summary: "The organization's approval count and address-book cooling periods",
    tag: 'Members and roles',
    scope: 'api_keys:admin',
    response: { status: 200, description: 'The settings', schema: OrganizationSettingsObject },
    handler: async ({ auth, em }) => ({ body: settingsBody(auth.organizationId, presentSettings(await em.findOneOrFail(Organization, { id: auth.organizationId }))) }),
  });

  routes.add({
    method: 'patch',
    path: '/v1/organization/settings',
    operationId: 'updateOrganizationSettings',
    summary: 'Change the approval count or the cooling periods: tightening at once, loosening through a change request',
    description:
      'Raising policy_activation_required_approvals or lengthening a cooling period applies at once (200). Lowering the count or shortening a cooling period ' +
      "is a change request under the organization's current count (202, applied once approved); one of the two per request. Organization-wide: both environments.",
    tag: 'Members and roles',
    scope: 'api_keys:admin',
    body: UpdateSettingsBody,
    response: { status: 200, description: 'The settings, changed', schema: OrganizationSettingsObject },
    otherResponses: [{ status: 202, description: 'The loosening waits for approvals (any tightening in the same body is applied)', schema: PendingSettingsObject }],
    handler: async ({ auth, em, deps, body }) => {
      const { comment, ...patch } = body;
      const outcome = await requestSettingsChange(em, await resolveActor(em, auth), patch, { comment, expiryHours: deps.config.POLICY_ACTIVATION_EXPIRY_HOURS });
      const settings = settingsBody(auth.organizationId, outcome.settings);
      if (!outcome.pending) return { body: settings };
      return { status: 202, body: { ...presentChangeRequest(outcome.pending, 'The change'), settings } };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/members',
    operationId: 'createMember',
    summary: 'Add a member to the organization (one who can vote: through a change request)',
    description:
      "A viewer is added at once (201). An owner, admin or approver adds a vote to every quorum: a change request under the organization's activation quorum " +
      '(202), the member added once approved, as added by the requester (whose requests they cannot vote on).',
    tag: 'Members and roles',
    scope: 'api_keys:admin',
    body: CreateMemberBody,
    response: { status: 201, description: 'The new member', schema: MemberObject },
    otherResponses: [{ status: 202, description: 'The approver waits for approvals', schema: PendingChangeObject }],
    handler: async ({ auth, em, deps, body }) => {
      const outcome = await requestMember(em, await resolveActor(em, auth), { apiKeyId: auth.apiKeyId, memberId: auth.memberId }, body, {
        expiryHours: deps.config.POLICY_ACTIVATION_EXPIRY_HOURS,
      });
      if (outcome.status === 'pending') return { status: 202, body: presentChangeRequest(outcome, `Adding ${body.email} as ${body.org_role}`) };
      await em.flush();
      return { status: 201, body: presentMember(outcome.member) };
    },
  });
}
