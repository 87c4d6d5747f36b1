import assert from 'node:assert/strict';
import type { RouteRegistry } from '../../src/http/route';
import { z } from '../../src/shared/schemas';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';

/** A route that fails the way a bug would, carrying text that must never reach the caller. */
function failingRoute(routes: RouteRegistry) {
  routes.add({
    method: 'post',
    path: '/v1/test-only/explode',
    operationId: 'testExplode',
    summary: 'fails',
    tag: 'Test',
    scope: 'authenticated',
    body: z.object({ amount: z.string() }),
    response: { status: 200, description: 'never' },
    handler: async () => {
      throw new Error('select * from api_keys where secret = sk_test_leakedleakedleakedleakedleak');
    },
  });
}

/** How often the deadlocking route's transaction ran. */
let deadlockedAttempts = 0;

/** A handler whose transaction PostgreSQL always rolls back for a deadlock (40P01), as the driver reports it. */
function deadlockingRoute(routes: RouteRegistry) {
  routes.add({
    method: 'post',
    path: '/v1/test-only/deadlock',
    operationId: 'testDeadlock',
    summary: 'always loses a deadlock',
    tag: 'Test',
    scope: 'authenticated',
    body: z.object({}),
    response: { status: 200, description: 'never' },
    handler: async ({ em }) => {
      deadlockedAttempts += 1;
      await em.execute('select 1');
      throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
    },
  });
}

function assertEnvelope(response: { body: any; headers: Headers }, status: number, type: string, code: string) {
  assert.equal(response.body.error.type, type, JSON.stringify(response.body));
  assert.equal(response.body.error.code, code);
  assert.equal(typeof response.body.error.message, 'string');
  assert.equal(response.body.error.request_id, response.headers.get('x-request-id'));
  assert.deepEqual(typeof response.body.error.details, 'object');
  void status;
}

describe('API contract: errors, request ids and versions', () => {
  let app: TestApp;
  let org: TestOrganization;

  before(async () => {
    app = await startTestApp({ extraModules: [failingRoute, deadlockingRoute] });
    org = await createTestOrganization();
  });
  after(() => app?.close());

  it('answers 401 authentication_error for a missing, malformed, unknown or revoked key, never echoing it', async () => {
    const missing = await app.request('GET', '/v1/api-keys/me');
    assert.equal(missing.status, 401);
    assertEnvelope(missing, 401, 'authentication_error', 'invalid_api_key');

    const malformed = await app.request('GET', '/v1/api-keys/me', { headers: { authorization: 'Basic abc' } });
    assert.equal(malformed.status, 401);

    const unknownSecret = 'sk_test_' + 'A'.repeat(32);
    const unknown = await app.request('GET', '/v1/api-keys/me', { key: unknownSecret });
    assert.equal(unknown.status, 401);
    assert.ok(!unknown.text.includes(unknownSecret));

    const { secret, id } = await org.key(['cards:read']);
    assert.equal((await app.request('DELETE', `/v1/api-keys/${id}`, { key: org.secret })).status, 200);
    const revoked = await app.request('GET', '/v1/api-keys/me', { key: secret });
    assert.equal(revoked.status, 401);
    assertEnvelope(revoked, 401, 'authentication_error', 'invalid_api_key');
  });

  it('runs a transaction that loses a deadlock again, three times in all, then answers 429 lock_timeout with Retry-After, not 500', async () => {
    deadlockedAttempts = 0;
    const response = await app.request('POST', '/v1/test-only/deadlock', { key: org.secret, body: {} });
    assert.equal(response.status, 429, response.text);
    assertEnvelope(response, 429, 'rate_limit_error', 'lock_timeout');
    assert.equal(response.headers.get('retry-after'), '1');
    assert.equal(deadlockedAttempts, 3);
  });

  it('answers 403 insufficient_scope naming the required scope', async () => {
    const { secret } = await org.key(['cards:read']);
    const response = await app.request('GET', '/v1/api-keys', { key: secret });
    assert.equal(response.status, 403);
    assertEnvelope(response, 403, 'permission_error', 'insufficient_scope');
    assert.equal(response.body.error.details.required_scope, 'api_keys:admin');
  });

  it('lets a write scope read its own domain', async () => {
    const { secret } = await org.key(['custody:write']);
    assert.equal((await app.request('GET', '/v1/chains', { key: secret })).status, 200);
  });

  it('answers 404 unknown_route for an unknown URL and 405 with Allow for a wrong method', async () => {
    const unknown = await app.request('GET', '/v1/does-not-exist', { key: org.secret });
    assert.equal(unknown.status, 404);
    assertEnvelope(unknown, 404, 'invalid_request_error', 'unknown_route');

    const wrongMethod = await app.request('PUT', '/v1/api-keys', { key: org.secret });
    assert.equal(wrongMethod.status, 405);
    assertEnvelope(wrongMethod, 405, 'invalid_request_error', 'method_not_allowed');
    assert.deepEqual(wrongMethod.headers.get('allow')?.split(', ').sort(), ['GET', 'HEAD', 'POST']);
  });

  it('routes a path whatever its case and trailing slash, and answers an unknown verb 405 on any path', async () => {
    // Each first two segments have a router of their own (src/http/route.ts): a path finds its routes as one router found them.
    assert.equal((await app.request('GET', '/V1/API-KEYS/ME', { key: org.secret })).status, 200);
    assert.equal((await app.request('GET', '/v1/api-keys/me/', { key: org.secret })).status, 200);
    assert.equal((await app.request('GET', '/healthz/')).status, 200);
    for (const path of ['/v1/api-keys', '/v1/does-not-exist', '/nowhere']) {
      const unknownVerb = await app.request('PROPFIND', path, { key: org.secret });
      assert.equal(unknownVerb.status, 405, path);
      assertEnvelope(unknownVerb, 405, 'invalid_request_error', 'method_not_allowed');
    }
  });

  it('answers 400 invalid_json, 415 for non-JSON bodies and 413 above 1 MiB, creating nothing', async () => {
    const before = await app.request('GET', '/v1/api-keys?limit=100', { key: org.secret });

    const badJson = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
      rawBody: '{"name": "x", ',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(badJson.status, 400);
    assertEnvelope(badJson, 400, 'invalid_request_error', 'invalid_json');

    const form = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
      rawBody: 'name=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(form.status, 415);
    assertEnvelope(form, 415, 'invalid_request_error', 'unsupported_media_type');

    const huge = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
      body: { name: 'x'.repeat(1024 * 1024 + 10), scopes: ['cards:read'] },
    });
    assert.equal(huge.status, 413);
    assertEnvelope(huge, 413, 'invalid_request_error', 'payload_too_large');

    const after = await app.request('GET', '/v1/api-keys?limit=100', { key: org.secret });
    assert.equal(after.body.data.length, before.body.data.length);
  });

  it('answers 400 validation_failed with the dotted param of the first offence and every issue', async () => {
    const response = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
      body: { name: '', scopes: ['cards:read', 'not-a-scope'] },
    });
    assert.equal(response.status, 400);
    assertEnvelope(response, 400, 'invalid_request_error', 'validation_failed');
    assert.equal(response.body.error.param, 'name');
    const params = response.body.error.details.issues.map((issue: { param: string }) => issue.param);
    assert.deepEqual(params.sort(), ['name', 'scopes.1']);

    const unknownField = await app.request('POST', '/v1/api-keys', {
      key: org.secret,
      body: { name: 'ok', scopes: ['cards:read'], colour: 'red' },
    });
    assert.equal(unknownField.status, 400);
    assert.equal(unknownField.body.error.code, 'validation_failed');

    const badQuery = await app.request('GET', '/v1/api-keys?limit=500', { key: org.secret });
    assert.equal(badQuery.status, 400);
    assert.equal(badQuery.body.error.param, 'limit');
  });

  it('answers 400 invalid_api_version for an unknown Api-Version and echoes the effective version', async () => {
    const bad = await app.request('GET', '/v1/api-keys/me', { key: org.secret, headers: { 'api-version': '2020-01-01' } });
    assert.equal(bad.status, 400);
    assertEnvelope(bad, 400, 'invalid_request_error', 'invalid_api_version');
    assert.equal(bad.body.error.param, 'Api-Version');

    const pinned = await app.request('GET', '/v1/api-keys/me', { key: org.secret });
    assert.equal(pinned.headers.get('api-version'), '2026-05-15');

    const overridden = await app.request('GET', '/v1/api-keys/me', { key: org.secret, headers: { 'api-version': '2026-01-30' } });
    assert.equal(overridden.status, 200);
    assert.equal(overridden.headers.get('api-version'), '2026-01-30');
    assert.equal(overridden.body.api_version, '2026-05-15', 'the key stays pinned; the header overrides one request');
  });

  it('generates an X-Request-Id, or keeps a well-formed one from the caller', async () => {
    const generated = await app.request('GET', '/healthz');
    assert.match(generated.headers.get('x-request-id') ?? '', /^req_[0-9a-f]{32}$/);
    const given = await app.request('GET', '/healthz', { headers: { 'x-request-id': 'trace-123' } });
    assert.equal(given.headers.get('x-request-id'), 'trace-123');
  });

  it('answers 500 api_error without a stack, SQL or secret', async () => {
    const response = await app.request('POST', '/v1/test-only/explode', { key: org.secret, body: { amount: '1' } });
    assert.equal(response.status, 500);
    assertEnvelope(response, 500, 'api_error', 'internal_error');
    assert.ok(!/select|sk_test_|at .*\.js/.test(response.text), response.text);
  });
});
