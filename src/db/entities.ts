import { ApiKey } from '../api-keys/entities';
import { IdempotencyRecord } from '../idempotency/entities';
import { Member, Organization, Role } from '../organizations/entities';
import { ApprovalRequest, ApprovalVote, Policy, PolicyAuditLog, PolicyRule } from '../policies/entities';

/** Every entity of every domain; a new domain adds its entities here. */
export const entities = [Organization, Member, Role, ApiKey, IdempotencyRecord, Policy, PolicyRule, ApprovalRequest, ApprovalVote, PolicyAuditLog];
