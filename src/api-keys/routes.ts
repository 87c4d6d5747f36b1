import { readOneByColumns } from '../db/lean';
import type { RouteRegistry } from '../http/route';
import { errors } from '../shared/errors';
import { assertBelowLimit } from '../shared/limits';
import { findMember } from '../organizations/service';
import { Organization } from '../organizations/entities';
import { ListQuery, listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { ApiKey } from './entities';
import { ApiKeyIdParams, ApiKeyObject, ApiKeyWithSecret, CreateApiKeyBody } from './schemas';
import { covers } from './scopes';
import { assertMayActFor, createApiKey, findOrganizationKey, presentApiKey } from './service';

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
    description: 'An organization holds at most MAX_API_KEYS (default 100) unrevoked keys per environment: one more is 409 `limit_reached` (details limit, current). See docs/limits.md.',
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
      const member = body.user_id ? await findMember(em, auth.organizationId, body.user_id, 'user_id') : null;
      if (member) await assertMayActFor(em, auth, member);
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
    summary: 'List active API keys',
    tag: 'API keys',
    scope: 'api_keys:admin',
    query: ListQuery,
    response: { status: 200, description: 'A page of keys, newest first', schema: listEnvelopeSchema(ApiKeyObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, ApiKey, { organization: auth.organizationId, revokedAt: null }, query, ['member']);
      return { body: listBody(page, (key) => presentApiKey(key)) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/v1/api-keys/:id',
    operationId: 'revokeApiKey',
    summary: 'Revoke an API key',
    tag: 'API keys',
    scope: 'api_keys:admin',
    params: ApiKeyIdParams,
    response: { status: 200, description: 'The revoked key', schema: ApiKeyObject },
    handler: async ({ auth, em, params, deps }) => {
      const key = await findOrganizationKey(em, auth.organizationId, params.id);
      key.revokedAt = new Date();
      await em.flush();
      // Other API processes evict it when the change commits (a trigger notifies them); this one at once.
      deps.keyCache.forget(key.id);
      return { body: presentApiKey(key) };
    },
  });
}
