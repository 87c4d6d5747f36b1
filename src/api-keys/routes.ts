import { readOneByColumns } from '../db/lean';
import type { AppDeps, EntityManager } from '../http/context';
import type { RouteRegistry } from '../http/route';
import { errors } from '../shared/errors';
import { assertBelowLimit } from '../shared/limits';
import { Organization } from '../organizations/entities';
import { ListQuery, listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { ApiKey } from './entities';
import { ApiKeyIdParams, ApiKeyObject, ApiKeyWithSecret, CreateApiKeyBody } from './schemas';
import { covers } from './scopes';
import { confirmApiKey, createApiKey, findOrganizationKey, memberForNewKey, presentApiKey } from './service';

export function registerApiKeyRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'get',
    path: '/v1/api-keys/me',
    operationId: 'getCurrentApiKey',
    summary: 'Introspect the calling API key',
    tag: 'API keys',
    scope: 'authenticated',
    response: { status: 200, description: 'The calling key', schema: ApiKeyObject },
    handler: async ({ auth, deps }) => {
      // The presenter needs the member's id only, which the key's row holds.
      const key = await readOneByColumns(deps.orm.em, ApiKey, { id: auth.apiKeyId, organization: auth.organizationId });
      if (!key) throw errors.unauthenticated('Invalid API key provided.');
      key.lastUsedAt = auth.lastUsedAt;
      return { body: presentApiKey(key) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/api-keys',
    operationId: 'createApiKey',
    summary: 'Create an API key (the secret is shown once)',
    description:
      "The key acts for the calling key's member, or for the member `user_id` names (an owner's key only): that key is `pending_confirmation` until a key acting for that member confirms it. " +
      'A key acting for no member mints nothing (403 `member_required`): service keys come from the operator CLI. ' +
      'An organization holds at most MAX_API_KEYS (default 100) unrevoked keys per environment: one more is 409 `limit_reached` (details limit, current). See docs/limits.md and docs/policies.md, "Keys and people".',
    tag: 'API keys',
    scope: 'api_keys:admin',
    body: CreateApiKeyBody,
    response: { status: 201, description: 'The new key with its secret', schema: ApiKeyWithSecret },
    handler: async ({ auth, em, body, deps }) => {
      if (!covers(auth.scopes, body.scopes)) {
        throw errors.permission('scope_escalation', 'A key can only grant scopes that the calling key holds.', {
          requested_scopes: body.scopes,
        });
      }
      const environment = body.environment ?? auth.environment;
      if (environment === 'live' && auth.environment !== 'live') {
        throw errors.permission('environment_escalation', 'A sandbox key cannot create live keys.');
      }
      const { member, pending } = await memberForNewKey(em, auth, body.user_id);
      // Counted per environment of the new key, so sandbox keys filling their cap never block live ones.
      await assertBelowLimit(em, {
        resource: 'api_keys',
        owner: `${auth.organizationId}:${environment}`,
        holder: `${environment} environment`,
        limit: deps.config.MAX_API_KEYS,
        setting: 'MAX_API_KEYS',
        remedy: 'revoke one',
        count: (tx) => tx.count(ApiKey, { organization: auth.organizationId, environment, revokedAt: null }),
      });
      const { key, secret } = createApiKey(em, {
        organization: em.getReference(Organization, auth.organizationId),
        name: body.name,
        scopes: body.scopes,
        environment,
        apiVersion: body.api_version,
        member,
        pendingConfirmation: pending,
        createdBy: { apiKeyId: auth.apiKeyId, memberId: auth.memberId },
      });
      await em.flush();
      return { status: 201, body: presentApiKey(key, secret) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/api-keys',
    operationId: 'listApiKeys',
    summary: "List the unrevoked API keys of the calling key's environment",
    tag: 'API keys',
    scope: 'api_keys:admin',
    query: ListQuery,
    response: { status: 200, description: 'A page of keys, newest first', schema: listEnvelopeSchema(ApiKeyObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, ApiKey, { organization: auth.organizationId, environment: auth.environment, revokedAt: null }, query, ['member']);
      return { body: listBody(page, (key) => presentApiKey(key)) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/v1/api-keys/:id',
    operationId: 'revokeApiKey',
    summary: 'Revoke an API key',
    description:
      'Takes effect at once. The gas stations and consolidation rules the key owns pause (event `automation.paused` each), and the automatic fee bumps of its sends stop, until a key takes them over. ' +
      "Another environment's key is 404 `resource_missing`.",
    tag: 'API keys',
    scope: 'api_keys:admin',
    params: ApiKeyIdParams,
    response: { status: 200, description: 'The revoked key', schema: ApiKeyObject },
    handler: async ({ auth, em, params, deps }) => {
      const key = await findOrganizationKey(em, auth, params.id);
      key.revokedAt = new Date();
      await deps.keyRevoked(em, key, auth);
      return { body: await savedKeyChange(em, deps, key) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/api-keys/:id/confirm',
    operationId: 'confirmApiKey',
    summary: 'Confirm a key minted to act for your member',
    description:
      "A key minted for another member (`user_id`) works once a key acting for that member, and not coming from the key's minter, confirms it: " +
      '403 `confirmation_forbidden` for a key of another member, 403 `confirmation_not_independent` for a key the minter made, 409 `api_key_not_pending` for a key that is not waiting.',
    tag: 'API keys',
    scope: 'api_keys:admin',
    params: ApiKeyIdParams,
    response: { status: 200, description: 'The confirmed key', schema: ApiKeyObject },
    handler: async ({ auth, em, params, deps }) => {
      return { body: await savedKeyChange(em, deps, await confirmApiKey(em, auth, params.id)) };
    },
  });
}

/** Writes a change of a key and answers it. Other API processes evict the key from their caches when the change commits (a trigger notifies them); this one at once. */
async function savedKeyChange(em: EntityManager, deps: AppDeps, key: ApiKey) {
  await em.flush();
  deps.keyCache.forget(key.id);
  return presentApiKey(key);
}
