import { API_VERSIONS } from '../shared/api-versions';
import { text, Timestamp, trimmedText, z } from '../shared/schemas';
import { ENVIRONMENTS } from './entities';
import { SCOPES } from './scopes';

export const ApiKeyObject = z
  .object({
    id: z.string(),
    object: z.literal('api_key'),
    name: z.string(),
    organization_id: z.string().uuid(),
    user_id: z.string().uuid().nullable().openapi({ description: 'Member this key acts for; null: a service key made by the operator CLI' }),
    status: z.enum(['active', 'pending_confirmation', 'revoked']).openapi({
      description: "pending_confirmation: minted for another member, it authenticates nothing until a key acting for that member confirms it (POST /v1/api-keys/:id/confirm)",
    }),
    environment: z.enum(ENVIRONMENTS),
    scopes: z.array(z.string()),
    api_version: z.string(),
    redacted_secret: z.string().openapi({ example: 'sk_test_...a1B2' }),
    created_at: Timestamp,
    last_used_at: Timestamp.optional().openapi({ description: 'Absent if never used; kept current to within a minute' }),
    revoked_at: Timestamp.optional(),
  })
  .openapi('ApiKey');

export const ApiKeyWithSecret = ApiKeyObject.extend({
  secret: z.string().openapi({ description: 'The plaintext secret. Shown only in this response.' }),
}).openapi('ApiKeyWithSecret');

export const CreateApiKeyBody = z
  .object({
    name: trimmedText(1, 255),
    scopes: z.array(z.enum(SCOPES)).min(1).max(SCOPES.length),
    environment: z.enum(ENVIRONMENTS).optional().openapi({ description: "Defaults to the calling key's environment" }),
    api_version: z.enum(API_VERSIONS).optional().openapi({ description: 'Defaults to the latest version' }),
    user_id: z.string().uuid().optional().openapi({
      description: "The member the key acts for; defaults to the calling key's member. Another member (an owner's key only) must confirm the key before it works.",
    }),
  })
  .strict()
  .openapi('CreateApiKeyRequest');

export const ApiKeyIdParams = z.object({ id: text(1, 64) });
