import { ListQuery } from '../shared/pagination';
import { text, Timestamp, z } from '../shared/schemas';
import { ENVIRONMENTS } from '../api-keys/entities';
import { GOVERNANCE_ACTOR_TYPES, GOVERNANCE_CHANGE_KINDS, GOVERNANCE_CHANGE_STATUSES } from './entities';

/** The 202 of a loosening change: it waits for the organization's quorum. */
export const PendingChangeObject = z
  .object({
    status: z.literal('pending_authorization'),
    approval_request_id: z.string(),
    workflow_id: z.string().openapi({ description: 'The change request workflow (governance-change-<approval_request_id>), for its history in the Temporal UI' }),
    required_approvals: z.number().int(),
    expires_at: Timestamp,
    message: z.string(),
    governance_change_id: z.string(),
    kind: z.enum(GOVERNANCE_CHANGE_KINDS),
    change: z.record(z.string(), z.unknown()).openapi({ description: 'What is applied once approved' }),
  })
  .openapi('PendingChange');

export const GovernanceChangeObject = z
  .object({
    id: z.string(),
    object: z.literal('governance_change'),
    kind: z.enum(GOVERNANCE_CHANGE_KINDS),
    environment: z.enum(ENVIRONMENTS).nullable().openapi({ description: "The subject's environment; null for organization-wide settings and members (listed in both)" }),
    subject: z.record(z.string(), z.string()).openapi({ description: 'The ids of what changed (policy_id, gas_station_id, organization_id, member_id...)' }),
    change: z.record(z.string(), z.unknown()).openapi({ description: 'What changed: fields with from and to, or the member added' }),
    requested_by: z.object({ type: z.enum(GOVERNANCE_ACTOR_TYPES), id: z.string(), name: z.string() }),
    approval_request_id: z.string().nullable().openapi({ description: 'The approval request that decided it; null when it needed none (a tightening, no approvals required, the operator)' }),
    required_approvals: z.number().int(),
    approvals: z.array(z.object({ member_id: z.string(), name: z.string(), at: Timestamp })),
    status: z.enum(GOVERNANCE_CHANGE_STATUSES),
    requested_at: Timestamp,
    applied_at: Timestamp.nullable(),
    decided_at: Timestamp.nullable(),
  })
  .openapi('GovernanceChange');

export const GovernanceLogQuery = ListQuery.extend({ status: z.enum(GOVERNANCE_CHANGE_STATUSES).optional(), kind: z.enum(GOVERNANCE_CHANGE_KINDS).optional() });

const ApprovalCount = z.number().int().min(0).max(20);
const CoolingHours = z.number().int().min(0).max(720);

export const OrganizationSettingsObject = z
  .object({
    object: z.literal('organization_settings'),
    organization_id: z.string().uuid(),
    policy_activation_required_approvals: ApprovalCount.openapi({ description: 'Approvals a policy activation, an address-book entry\'s early use and a change request need; 0: at once' }),
    address_book_cooling_hours: z.object({ live: CoolingHours, sandbox: CoolingHours }).openapi({ description: 'Hours a new address-book entry waits before whitelists and consolidation count it' }),
  })
  .openapi('OrganizationSettings');

export const UpdateSettingsBody = z
  .object({
    policy_activation_required_approvals: ApprovalCount.optional(),
    address_book_cooling_hours: z.object({ live: CoolingHours.optional(), sandbox: CoolingHours.optional() }).strict().optional(),
    comment: text(0, 500).optional().openapi({ description: 'Shown to the approvers of a change request' }),
  })
  .strict()
  .openapi('UpdateOrganizationSettingsRequest');

export const PendingSettingsObject = PendingChangeObject.extend({ settings: OrganizationSettingsObject.openapi({ description: 'The settings now: raised ones applied, the lowered one not yet' }) }).openapi(
  'PendingOrganizationSettings',
);
