import assert from 'node:assert/strict';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Client, Connection } from '@temporalio/client';
import { MikroORM } from '@mikro-orm/postgresql';
import { ormConfig } from '../../src/db/mikro-orm.config';
import { startTestApp, type TestApp } from '../support/app';
import { freeLoopbackPort } from '../support/ports';

describe('Operations endpoints and the OpenAPI document', () => {
  let app: TestApp;

  before(async () => {
    app = await startTestApp();
  });
  after(() => app?.close());

  it('reports liveness and readiness against the real PostgreSQL and Temporal', async () => {
    assert.deepEqual((await app.request('GET', '/healthz')).body, { status: 'ok' });
    const ready = await app.request('GET', '/readyz');
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.body, { status: 'ok', checks: { database: 'ok', temporal: 'ok' } });
  });

  it('answers 503 on /readyz when Temporal is unreachable', async () => {
    // No retry interceptors: nothing may still be retrying once the test closes the connection.
    const connection = Connection.lazy({ address: '127.0.0.1:1', interceptors: [] });
    const unreachable = { connection, client: new Client({ connection }) };
    const degraded = await startTestApp({ temporal: unreachable });
    try {
      const ready = await degraded.request('GET', '/readyz');
      assert.equal(ready.status, 503);
      assert.deepEqual(ready.body.checks, { database: 'ok', temporal: 'unavailable' });
    } finally {
      await degraded.close();
      await unreachable.connection.close().catch(() => undefined);
    }
  });

  it('answers 503 database_unavailable with Retry-After, not 500, while PostgreSQL cannot be reached', async () => {
    // A real driver failure: connection refused on a loopback port nothing listens on.
    const closedPort = await freeLoopbackPort();
    const unreachable = await MikroORM.init({ ...ormConfig(`postgresql://postgres@127.0.0.1:${closedPort}/custody`), connect: false });
    const degraded = await startTestApp({ orm: unreachable });
    try {
      const response = await degraded.request('GET', '/v1/api-keys/me', { key: `sk_test_${'a'.repeat(32)}` });
      assert.equal(response.status, 503);
      assert.equal(response.headers.get('retry-after'), '2');
      assert.equal(response.body.error.code, 'database_unavailable');
      assert.equal(response.body.error.type, 'provider_error');
    } finally {
      await degraded.close();
      await unreachable.close(true);
    }
  });

  it('exposes Prometheus metrics including request counts by route', async () => {
    await app.request('GET', '/healthz');
    const metrics = await app.request('GET', '/metrics');
    assert.equal(metrics.status, 200);
    assert.match(metrics.headers.get('content-type') ?? '', /text\/plain/);
    assert.match(metrics.text, /http_requests_total\{method="GET",route="\/healthz",status="200"\} \d+/);
    assert.match(metrics.text, /process_cpu_user_seconds_total/);
  });

  it('serves an OpenAPI 3.1 document that a validator accepts and that lists every route', async () => {
    const response = await app.request('GET', '/openapi.json');
    assert.equal(response.status, 200);
    const document = response.body;
    assert.equal(document.openapi, '3.1.0');
    const validator = new Validator();
    const result = await validator.validate(document);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));

    const documented = new Set<string>();
    for (const [path, operations] of Object.entries(document.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(operations)) documented.add(`${method} ${path}`);
    }
    const served = app.operations.map((op) => `${op.method} ${op.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`);
    assert.ok(served.length >= 16);
    for (const operation of served) assert.ok(documented.has(operation), `${operation} is missing from /openapi.json`);
    assert.ok(document.components.schemas.Error, 'the error envelope is a shared component');
    assert.ok(document.paths['/v1/api-keys'].post.parameters.some((p: { name: string }) => p.name === 'Idempotency-Key'));
  });

  it('renders the reference at /docs with its assets', async () => {
    const page = await app.request('GET', '/docs');
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    assert.match(page.text, /\/openapi\.json/);
    const script = await app.request('GET', '/docs/assets/swagger-ui-bundle.js');
    assert.equal(script.status, 200);
    assert.ok(script.text.length > 100_000);
    assert.equal((await app.request('GET', '/docs/assets/..%2Fpackage.json')).status, 404);
  });
});
