import { Email, text, Timestamp, trimmedText, z } from '../shared/schemas';
import { ORG_ROLES } from './entities';

export const MemberObject = z
  .object({
    id: z.string().uuid(),
    object: z.literal('member'),
    organization_id: z.string().uuid(),
    name: z.string(),
    email: z.string(),
    org_role: z.enum(ORG_ROLES),
    role_ids: z.array(z.string()),
    created_at: Timestamp,
  })
  .openapi('Member');

export const CreateMemberBody = z
  .object({
    name: trimmedText(1, 255),
    email: Email,
    org_role: z.enum(ORG_ROLES),
    role_ids: z.array(text(1, 64)).max(50).optional().openapi({ description: 'Custom roles to join' }),
  })
  .strict()
  .openapi('CreateMemberRequest');

export const RoleObject = z
  .object({
    id: z.string(),
    object: z.literal('role'),
    organization_id: z.string().uuid(),
    name: z.string(),
    description: z.string(),
    built_in: z.boolean().openapi({ description: 'Built-in roles hold every member of the org_role of that name' }),
    member_count: z.number().int(),
    created_at: Timestamp,
  })
  .openapi('Role');
