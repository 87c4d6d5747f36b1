import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { ApiKey, type Environment } from '../../src/api-keys/entities';
import { createApiKey } from '../../src/api-keys/service';
import { createApp, type RouteModule } from '../../src/http/app';
import type { AppDeps } from '../../src/http/context';
import type { Orm } from '../../src/db/orm';
import type { RouteRegistry } from '../../src/http/route';
import { routeModules } from '../../src/modules';
import { Organization, type OrgRole } from '../../src/organizations/entities';
import { createMember, createOrganization } from '../../src/organizations/service';
import { createAppDeps } from '../../src/runtime';
import { localTemporal, testConfig, testOrm } from './environment';
import { rememberCardSecrets, testLogger } from './secret-scan';

export interface TestApp {
  url: string;
  deps: AppDeps;
  /** Every route the app serves, as registered. */
  operations: RouteRegistry['operations'];
  request: (method: string, path: string, options?: RequestOptions) => Promise<TestResponse>;
  close: () => Promise<void>;
}

export interface RequestOptions {
  key?: string;
  body?: unknown;
  /** Sent as-is, bypassing JSON encoding. */
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  /** Tests read arbitrary JSON; `any` keeps assertions short. */
  body: any;
  text: string;
}

/** The real app (real PostgreSQL, real Temporal dev server) on an ephemeral port. */
export async function startTestApp(
  options: { config?: Record<string, string | undefined>; extraModules?: RouteModule[]; temporal?: AppDeps['temporal']; orm?: Orm } = {},
): Promise<TestApp> {
  const config = testConfig({ PORT: '0', ...options.config });
  const orm = options.orm ?? (await testOrm());
  const temporal = options.temporal ?? (await localTemporal());
  const deps = createAppDeps(config, orm, testLogger('api'), { connection: temporal.connection, client: temporal.client });
  const { app, routes } = createApp(deps, [...routeModules, ...(options.extraModules ?? [])]);
  // As the server does at start (src/server.ts), but awaited: a test's first request never races the nodes' check.
  await deps.chains.checkAll();
  const server: Server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const request = async (method: string, path: string, opts: RequestOptions = {}): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    let body: string | Buffer | undefined = opts.rawBody;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(`${url}${path}`, { method, headers, body });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    rememberCardSecrets(parsed);
    return { status: response.status, headers: response.headers, body: parsed, text };
  };

  return {
    url,
    deps,
    operations: routes.operations,
    request,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await deps.keyCache.stop();
    },
  };
}

export interface TestOrganization {
  organizationId: string;
  /** Root key secret (scope `*`). */
  secret: string;
  apiKeyId: string;
  /** Creates another key of this organization with the given scopes; returns its secret. */
  key: (scopes: string[], environment?: Environment) => Promise<{ secret: string; id: string }>;
}

/** A fresh organization with a root key, made through the same service code the CLI uses. */
export async function createTestOrganization(name = 'Test organization', environment: Environment = 'sandbox'): Promise<TestOrganization> {
  const orm = await testOrm();
  const em = orm.em.fork();
  const organization = createOrganization(em, name);
  const root = createApiKey(em, { organization, name: 'Root key', scopes: ['*'], environment });
  await em.flush();
  const key = async (scopes: string[], keyEnvironment: Environment = environment) => {
    const keyEm = orm.em.fork();
    const created = createApiKey(keyEm, {
      organization: keyEm.getReference(Organization, organization.id),
      name: `Key ${scopes.join(' ')}`,
      scopes,
      environment: keyEnvironment,
    });
    await keyEm.flush();
    return { secret: created.secret, id: created.key.id };
  };
  return { organizationId: organization.id, secret: root.secret, apiKeyId: root.key.id, key };
}

/**
 * A member the operator adds and a key acting for them, as `npm run cli -- member:create` and
 * `key:create --user-id` make them: no one but the operator stands behind either, so the member's
 * votes count, and the key mints keys through the API (docs/policies.md, "Keys and people").
 */
export async function operatorMember(
  organizationId: string,
  options: { name?: string; orgRole?: OrgRole; scopes?: string[]; environment?: Environment } = {},
): Promise<{ memberId: string; keyId: string; secret: string }> {
  const { name = 'Owner', orgRole = 'owner', scopes = ['*'], environment = 'sandbox' } = options;
  const em = (await testOrm()).em.fork();
  const organization = em.getReference(Organization, organizationId);
  const member = await createMember(em, organization, { name, email: `${name.toLowerCase().replace(/\W+/g, '-')}-${randomUUID()}@example.com`, org_role: orgRole });
  const { key, secret } = createApiKey(em, { organization, name: `${name}'s key`, scopes, environment, member });
  await em.flush();
  return { memberId: member.id, keyId: key.id, secret };
}

export { ApiKey };
