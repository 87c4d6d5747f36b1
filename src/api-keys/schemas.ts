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
    user_id: z.string().uuid().nullable().openapi({ description: 'Member this key acts for, if any' }),
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
    user_id: z.string().uuid().optional().openapi({ description: 'A member of the organization the key acts for' }),
  })
  .strict()
  .openapi('CreateApiKeyRequest');

export const ApiKeyIdParams = z.object({ id: text(1, 64) });
