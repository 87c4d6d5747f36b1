import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { RouteRegistry } from '../http/route';
import { errors } from '../shared/errors';
import { ErrorEnvelope, z } from '../shared/schemas';
import { buildOpenApiDocument } from './openapi';

/** The swagger-ui-dist assets, found without loading its index, which evaluates the 1.5 MB browser bundle (about 40 MB resident). */
const SWAGGER_UI_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));

const HealthObject = z
  .object({
    status: z.literal('ok'),
    instance_id: z.string().optional().openapi({ description: 'The INSTANCE_ID the process was started with (`npm start` sets one, to tell its own API from another listener on its port)' }),
  })
  .openapi('Health');
const ReadinessObject = z
  .object({
    status: z.enum(['ok', 'unavailable']),
    checks: z.object({ database: z.enum(['ok', 'unavailable']), temporal: z.enum(['ok', 'unavailable']) }),
  })
  .openapi('Readiness');

const DOC_ASSETS = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
} as const;
const DOC_ASSET_FILES = Object.keys(DOC_ASSETS) as (keyof typeof DOC_ASSETS)[];

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script>window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#reference', deepLinking: true });</script>
</body>
</html>`;

async function probe(check: () => Promise<unknown>, timeoutMs = 2000): Promise<'ok' | 'unavailable'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      }),
    ]);
    return 'ok';
  } catch {
    return 'unavailable';
  } finally {
    clearTimeout(timer);
  }
}

/** Operational endpoints: liveness, readiness, metrics, and the API's own documentation. */
export function registerSystemRoutes(routes: RouteRegistry): void {
  let document: ReturnType<typeof buildOpenApiDocument> | undefined;

  routes.add({
    method: 'get',
    path: '/healthz',
    operationId: 'getHealth',
    summary: 'Liveness: the process is up',
    tag: 'Operations',
    scope: 'public',
    response: { status: 200, description: 'Up', schema: HealthObject },
    handler: async ({ deps }) => ({ body: { status: 'ok', ...(deps.config.INSTANCE_ID ? { instance_id: deps.config.INSTANCE_ID } : {}) } }),
  });

  routes.add({
    method: 'get',
    path: '/readyz',
    operationId: 'getReadiness',
    summary: 'Readiness: PostgreSQL and Temporal answer',
    tag: 'Operations',
    scope: 'public',
    response: { status: 200, description: 'Ready', schema: ReadinessObject },
    otherResponses: [{ status: 503, description: 'Not ready: the same body, naming the check that failed', schema: ReadinessObject }],
    handler: async ({ deps }) => {
      const [database, temporal] = await Promise.all([
        probe(() => deps.orm.em.getConnection().execute('select 1')),
        // A deadline, so the client's own retries stop when the probe gives up.
        probe(() => deps.temporal.connection.withDeadline(Date.now() + 2000, () => deps.temporal.connection.workflowService.getSystemInfo({}))),
      ]);
      const ready = database === 'ok' && temporal === 'ok';
      return { status: ready ? 200 : 503, body: { status: ready ? 'ok' : 'unavailable', checks: { database, temporal } } };
    },
  });

  routes.add({
    method: 'get',
    path: '/metrics',
    operationId: 'getMetrics',
    summary: 'Prometheus metrics',
    tag: 'Operations',
    scope: 'public',
    response: { status: 200, description: 'Prometheus text exposition', schema: z.string(), contentType: 'text/plain' },
    otherResponses: [{ status: 404, description: 'Metrics are disabled (METRICS_ENABLED=false)', schema: ErrorEnvelope }],
    handler: async ({ deps }) => {
      if (!deps.config.METRICS_ENABLED) throw errors.notFound('route', '/metrics');
      return { body: await deps.metrics.metrics(), contentType: deps.metrics.contentType };
    },
  });

  routes.add({
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'The OpenAPI 3.1 document of this API',
    tag: 'Operations',
    scope: 'public',
    response: { status: 200, description: 'OpenAPI 3.1 document', schema: z.record(z.string(), z.unknown()) },
    handler: async () => {
      document ??= buildOpenApiDocument(routes);
      return { body: document };
    },
  });

  routes.add({
    method: 'get',
    path: '/docs',
    operationId: 'getDocs',
    summary: 'Rendered API reference',
    tag: 'Operations',
    scope: 'public',
    response: { status: 200, description: 'HTML page', schema: z.string(), contentType: 'text/html' },
    handler: async () => ({ body: DOCS_PAGE, contentType: 'text/html; charset=utf-8' }),
  });

  routes.add({
    method: 'get',
    path: '/docs/assets/:file',
    operationId: 'getDocsAsset',
    summary: 'Static files of the rendered reference',
    tag: 'Operations',
    scope: 'public',
    params: z.object({ file: z.enum(DOC_ASSET_FILES) }),
    response: { status: 200, description: 'CSS or JavaScript', schema: z.string(), contentType: Object.values(DOC_ASSETS) },
    handler: async ({ params }) => {
      const contentType = DOC_ASSETS[params.file];
      const body = await readFile(path.join(SWAGGER_UI_DIR, params.file));
      return { body, contentType, headers: { 'Cache-Control': 'public, max-age=86400' } };
    },
  });
}
