import { text, Timestamp, z } from '../shared/schemas';
import { APPROVAL_REQUEST_KINDS, APPROVAL_REQUEST_STATUSES, VOTE_DECISIONS } from './entities';

/** Approval requests as the API takes and shows them: votes, the list's filters, a pending activation and the request itself. */

export const VoteBody = z.object({ comment: text(0, 500).optional() }).strict().openapi('ApprovalVoteRequest');

export const ApprovalRequestListQuery = z.object({ status: z.enum(APPROVAL_REQUEST_STATUSES).optional(), kind: z.enum(APPROVAL_REQUEST_KINDS).optional() });

export const PendingActivationObject = z
  .object({
    status: z.literal('pending_authorization'),
    policy_id: z.string(),
    approval_request_id: z.string(),
    workflow_id: z.string().openapi({ description: 'The activation workflow, for its history in the Temporal UI' }),
    required_approvals: z.number().int(),
    expires_at: Timestamp,
    message: z.string(),
  })
  .openapi('PendingActivation');

export const ApprovalRequestObject = z
  .object({
    id: z.string(),
    object: z.literal('approval_request'),
    kind: z.enum(APPROVAL_REQUEST_KINDS).openapi({
      description: 'What it approves: a policy activation, an address-book entry before its cooling period ends, a send a require_approval rule held, or a loosening change to a control (governance_change)',
    }),
    policy_id: z.string().nullable().openapi({ description: 'The draft policy to activate; null on other kinds' }),
    address_book_entry_id: z.string().uuid().nullable().openapi({ description: 'The address-book entry to use before its cooling period ends; null on other kinds' }),
    governance_change_id: z.string().nullable().openapi({ description: 'The change to apply once approved (GET /v1/governance/log shows what it changes); null on other kinds' }),
    transaction: z
      .object({
        request: z.record(z.string(), z.unknown()).openapi({ description: 'The send as asked (POST /v1/transactions body): the identical request, with the same Idempotency-Key, is what the approval lets pass' }),
        held_by_policy_id: z.string().nullable(),
        held_by_rule_id: z.string().nullable(),
        approver_ids: z.array(z.string()).openapi({ description: "The members the rule's approvers stood for when the send was held: only they vote (not the requester)" }),
        used_at: Timestamp.nullable().openapi({ description: 'When the approved send passed the gate (an approval admits one send)' }),
        transaction_id: z.string().nullable().openapi({ description: 'The send the approval admitted' }),
      })
      .nullable()
      .openapi({ description: 'The held send (kind transaction); null on other kinds' }),
    status: z.enum(APPROVAL_REQUEST_STATUSES),
    requested_by: z.string(),
    requested_by_name: z.string(),
    comment: z.string(),
    required_approvals: z.number().int(),
    approvals: z.number().int(),
    votes: z.array(z.object({ user_id: z.string(), decision: z.enum(VOTE_DECISIONS), comment: z.string(), created_at: Timestamp })),
    expires_at: Timestamp,
    decided_at: Timestamp.nullable(),
    workflow_id: z.string().openapi({ description: 'The workflow collecting the votes (policy-activation-<id>, address-book-entry-approval-<id>, transaction-approval-<id> or governance-change-<id>), for its history in the Temporal UI' }),
    created_at: Timestamp,
  })
  .openapi('ApprovalRequest');
