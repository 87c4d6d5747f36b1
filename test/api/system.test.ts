import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Client, Connection } from '@temporalio/client';
import { MikroORM } from '@mikro-orm/postgresql';
import { MAX_SANDBOX_CREDIT, SANDBOX_CREDIT_PATTERN } from '../../src/balances/schemas';
import { ISO_ALPHA3_COUNTRIES } from '../../src/cards/countries';
import { CHAIN_IDS } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { ADDRESS_PATTERNS } from '../../src/chains/schemas';
import { attachStatementPool } from '../../src/db/lean';
import { ormConfig } from '../../src/db/mikro-orm.config';
import { EVENT_TYPES } from '../../src/events/event-types';
import { ACTION_TYPES } from '../../src/policies/schema';
import { BOLT11_PATTERN } from '../../src/lightning/schemas';
import { CORRIDORS } from '../../src/payouts/corridors';
import { BASE_UNIT_PATTERN, DISPLAY_PATTERN, POSITIVE_DISPLAY_PATTERN } from '../../src/shared/money';
import { INT4_MAX } from '../../src/shared/schemas';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { freeLoopbackPort } from '../support/ports';
import { terminateWorkflows } from '../support/scanning';
import { localTemporal } from '../support/environment';

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
    // As createOrm gives every service process: the key's read goes through the statement pool.
    attachStatementPool(unreachable);
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

  it('answers 503 worker_unavailable, not a request held open, when no worker answers a workflow update in time', async () => {
    // A task queue no worker polls: the devnet's block producer is started there and never runs its update.
    const workerless = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: `no-worker-${randomUUID()}`, WORKFLOW_UPDATE_TIMEOUT_SECONDS: '2' } });
    try {
      const org = await createTestOrganization();
      const started = Date.now();
      const response = await workerless.request('POST', '/v1/sandbox/chains/ethereum/blocks', { key: org.secret, body: { count: 1 } });
      assert.equal(response.status, 503, response.text);
      assert.equal(response.body.error.code, 'worker_unavailable');
      assert.equal(response.headers.get('retry-after'), '5');
      assert.ok(Date.now() - started < 30_000, 'answered at the deadline, not held open');
    } finally {
      // The block producer's and the scanner's ids are the chain's: left on a queue no worker serves, a later file's mining would wait on them.
      await terminateWorkflows((await localTemporal()).client, [devnetBlocksWorkflowId('ethereum'), chainScanWorkflowId('ethereum', 'sandbox')]);
      await workerless.close();
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

  it('documents what fuzzing found the routes answer: a nullable object admits null, removed routes their 410 envelope and no body', async () => {
    const document = (await app.request('GET', '/openapi.json')).body;
    // zod-to-openapi writes a nullable reference as allOf [$ref, {type: [object, null]}], which no null satisfies.
    const nullableAllOf: string[] = [];
    const walk = (node: unknown, at: string) => {
      if (typeof node !== 'object' || node === null) return;
      const allOf = (node as { allOf?: { type?: unknown }[] }).allOf;
      if (allOf?.some((part) => Array.isArray(part.type) && part.type.includes('null'))) nullableAllOf.push(at);
      for (const [key, value] of Object.entries(node)) walk(value, `${at}/${key}`);
    };
    walk(document, '#');
    assert.deepEqual(nullableAllOf, []);
    assert.deepEqual(document.components.schemas.SandboxDeposit.properties.deposit.anyOf, [{ $ref: '#/components/schemas/Deposit' }, { type: 'null' }]);

    const legacy = document.paths['/api/virtualcards/{cardId}/topup'].post;
    assert.equal(legacy.requestBody, undefined, 'answered 410 whatever the body');
    assert.deepEqual(legacy.responses['410'].content['application/json'].schema, { $ref: '#/components/schemas/Error' });
    assert.deepEqual(Object.keys(document.paths['/readyz'].get.responses).sort(), ['200', '400', '503']);
  });

  it('documents what fuzzing found about amounts and bodies: nullable amounts admit null, amounts their patterns, optional bodies are not required', async () => {
    const document = (await app.request('GET', '/openapi.json')).body;
    const schemas = document.components.schemas;
    // The amount schemas once set `type: string`, which hid the null of a nullable amount.
    const refill = schemas.GasStation.properties.refill_amount_raw;
    assert.deepEqual(refill.type, ['string', 'null']);
    assert.equal(refill.pattern, BASE_UNIT_PATTERN.source);
    // A budget is never null (the station's own or the deployment's default): a plain amount.
    const budget = schemas.GasStation.properties.daily_sponsorship_budget_raw;
    assert.equal(budget.type, 'string');
    assert.equal(budget.pattern, BASE_UNIT_PATTERN.source);
    // Amounts were any string: now the patterns their refinements check.
    assert.equal(schemas.PayoutQuoteRequest.properties.amount.pattern, DISPLAY_PATTERN.source);
    const credit = schemas.SandboxBalanceCreditRequest.properties.amount.anyOf;
    assert.deepEqual(credit.map((form: { type: string }) => form.type), ['string', 'integer']);
    assert.equal(credit[0].pattern, SANDBOX_CREDIT_PATTERN.source);
    assert.equal(credit[1].maximum, Number(MAX_SANDBOX_CREDIT));
    // Every field of PATCH /v1/policies/{id} is optional: the body was documented as required, yet none is needed.
    assert.equal(document.paths['/v1/policies/{id}'].patch.requestBody.required, false);
    assert.equal(document.paths['/v1/address-book'].post.requestBody.required, true, 'a body that {} does not satisfy stays required');
  });

  it('documents what the services refuse where a schema can say it: addresses per chain, BOLT11, corridors, networks, exactly one of two', async () => {
    const document = (await app.request('GET', '/openapi.json')).body;
    const schemas = document.components.schemas;
    const bodyOf = (path: string) => document.paths[path].post.requestBody.content['application/json'].schema;
    // One object per chain, each with its address pattern.
    for (const [name, body] of [
      ['address book', schemas.CreateAddressBookEntryRequest],
      ['sandbox deposits', bodyOf('/v1/sandbox/deposits')],
      ['subscriptions', schemas.CreateSubscriptionRequest],
    ]) {
      const patterns = Object.fromEntries(body.oneOf.map((variant: any) => [variant.properties.chain.enum[0], variant.properties.address.pattern]));
      assert.deepEqual(patterns, Object.fromEntries(CHAIN_IDS.map((chain) => [chain, ADDRESS_PATTERNS[chain].source])), name);
    }
    const depositAssets = bodyOf('/v1/sandbox/deposits').oneOf.find((variant: any) => variant.properties.chain.enum[0] === 'tron').properties.asset.enum;
    assert.deepEqual(depositAssets, ['TRX', 'USDT_TRX', 'USDT'], "a sandbox deposit's asset is one of the chain's, by id or symbol");
    const decode = bodyOf('/api/lightning/decode').properties.request;
    assert.equal(decode.pattern, BOLT11_PATTERN);
    assert.match(decode.example, new RegExp(BOLT11_PATTERN), 'the example has the documented shape');
    for (const path of ['/api/lightning/payments', '/api/lightning/payments/initiate']) assert.equal(bodyOf(path).properties.request.pattern, BOLT11_PATTERN, path);

    const quote = schemas.PayoutQuoteRequest.properties;
    assert.deepEqual(quote.country.enum, CORRIDORS.map((corridor) => corridor.country));
    assert.deepEqual(quote.toCurrency.enum, CORRIDORS.map((corridor) => corridor.currency.code));
    assert.deepEqual(['usdt', 'USDC', 'Btc', 'ETH'].map((symbol) => new RegExp(quote.fromAsset.pattern).test(symbol)), [true, true, true, false]);

    const sponsor = schemas.SponsorBroadcastRequest.properties;
    assert.deepEqual(sponsor.network.enum, ['mainnet', 'sepolia', 'nile']);
    assert.deepEqual(
      ['0x52908400098527886E0F7030069857D2E4169EE7', 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx'].map((address) =>
        new RegExp(sponsor.from_address.pattern).test(address),
      ),
      [true, true, false],
    );

    const simulate = schemas.SimulatePolicyRequest.anyOf;
    assert.deepEqual(simulate.map((shape: { required: string[]; additionalProperties: boolean }) => [shape.required, shape.additionalProperties]), [
      [['requests'], false],
      [['history'], false],
    ]);
  });

  it("documents what positive-data fuzzing found the services refuse: event types, the card currency, metadata keys, a rule's config per action type, emails", async () => {
    const document = (await app.request('GET', '/openapi.json')).body;
    const schemas = document.components.schemas;
    for (const name of ['CreateWebhookRequest', 'UpdateWebhookRequest']) {
      assert.deepEqual(schemas[name].properties.event_types.items.enum, EVENT_TYPES.map((entry) => entry.type), name);
    }
    const currency = document.paths['/api/cards'].post.requestBody.content['application/json'].schema.properties.currency;
    assert.deepEqual(['USD', 'usd', 'Usd', 'EUR', 'USDT'].map((value) => new RegExp(currency.pattern).test(value)), [true, true, true, false, false]);
    for (const name of ['CreateVaultRequest', 'CreateWalletRequest']) {
      const metadata = schemas[name].properties.metadata;
      assert.deepEqual([metadata.propertyNames, metadata.maxProperties], [{ minLength: 1, maxLength: 40 }, 50], name);
    }
    // action_config was any object: the one closed object its action_type takes, required where {} is none.
    const rule = schemas.CreatePolicyRuleRequest;
    assert.deepEqual(
      rule.oneOf.map((branch: any) => [branch.properties.action_type.const, branch.properties.action_config.additionalProperties, branch.required ?? []]),
      ACTION_TYPES.map((type) => [type, false, ['require_approval', 'delay'].includes(type) ? ['action_config'] : []]),
    );
    assert.deepEqual(rule.oneOf.find((branch: any) => branch.properties.action_type.const === 'delay').properties.action_config.required, ['delay_minutes']);
    // `format: email` admits addresses zod refuses (a `!` in the local part): zod's pattern is in the document.
    for (const email of [schemas.CreateMemberRequest.properties.email, schemas.CardCustomerInput.properties.email]) {
      assert.deepEqual(['ada@example.com', 'e!n@upztila9.02kkd6y9.example'].map((address) => new RegExp(email.pattern).test(address)), [true, false]);
    }
    assert.equal(schemas.CardCustomerInput.properties.date_of_birth.format, 'date', 'was any string');
    assert.deepEqual(schemas.CardCustomerInput.properties.country.enum, [...ISO_ALPHA3_COUNTRIES], 'was any string');
  });

  it('documents the bounds positive-data fuzzing found validation held alone: no zero amounts where refused, integer maxima, trimmed lengths, a recent occurred_at', async () => {
    const document = (await app.request('GET', '/openapi.json')).body;
    const schemas = document.components.schemas;
    const bodyOf = (path: string) => document.paths[path].post.requestBody.content['application/json'].schema;
    const matches = (schema: { pattern: string }, values: string[]) => values.map((value) => new RegExp(schema.pattern, 'u').test(value));

    // "0" was documented and refused: the amounts a send, a deposit, a refill or a threshold takes are positive in the document.
    const positive = [
      ...bodyOf('/v1/sandbox/deposits').oneOf.map((variant: any) => variant.properties.amount),
      schemas.CreateGasStationRequest.properties.refill_amount,
      schemas.UpdateGasStationRequest.properties.refill_amount,
      schemas.RefillGasStationRequest.properties.amount,
      schemas.SponsorBroadcastRequest.properties.amount,
      schemas.EstimateFeeRequest.properties.amount,
      schemas.CreateTransactionRequest.properties.amount,
      schemas.CreateConsolidationRuleRequest.properties.threshold_value,
      schemas.UpdateConsolidationRuleRequest.properties.threshold_value,
    ];
    for (const amount of positive) assert.equal(amount.pattern, POSITIVE_DISPLAY_PATTERN.source);
    assert.deepEqual(matches(positive[0], ['0', '0.000', '00', '0.001', '10', '1.50']), [false, false, false, true, true, true]);
    assert.equal(schemas.CreateGasStationRequest.properties.threshold.pattern, DISPLAY_PATTERN.source, 'a threshold of 0 is taken');
    const credit = schemas.SandboxBalanceCreditRequest.properties.amount.anyOf;
    assert.deepEqual(matches(credit[0], ['0', '1', String(MAX_SANDBOX_CREDIT), String(MAX_SANDBOX_CREDIT + 1n), '01']), [false, true, true, false, false]);
    assert.equal(credit[1].exclusiveMinimum, 0);

    // Integers past 2^53 were documented and refused (zod's .int()): no request integer is without a maximum.
    const unbounded: string[] = [];
    const resolve = (node: any): any => (node?.$ref ? schemas[node.$ref.split('/').pop()] : node);
    const walk = (node: any, at: string, seen: Set<unknown>) => {
      node = resolve(node);
      if (typeof node !== 'object' || node === null || seen.has(node)) return;
      seen.add(node);
      if (node.type === 'integer' && node.maximum === undefined) unbounded.push(at);
      for (const [key, value] of Object.entries(node)) walk(value, `${at}/${key}`, seen);
    };
    for (const [path, operations] of Object.entries<any>(document.paths)) {
      for (const [method, operation] of Object.entries<any>(operations)) {
        walk(operation.requestBody, `${method} ${path} body`, new Set());
        walk(operation.parameters, `${method} ${path} parameters`, new Set());
      }
    }
    assert.deepEqual(unbounded, []);
    assert.equal(schemas.CreatePolicyRuleRequest.properties.order.maximum, INT4_MAX);
    assert.equal(schemas.EvaluatePolicyRequest.properties.approval_count.maximum, INT4_MAX);

    // minLength counted the white space zod trims first ("\r\u00e9" is 2 characters, 1 trimmed): a pattern says what trimming keeps.
    const ruleName = schemas.CreatePolicyRuleRequest.properties.name;
    assert.deepEqual(matches(ruleName, ['\r\u00e9', ' \u00a0a\u3000', 'ab', ' a b ', '\ud83d\ude00\ud83d\ude00']), [false, false, true, true, true]);
    const vaultName = schemas.CreateVaultRequest.properties.name;
    assert.deepEqual([vaultName.minLength, vaultName.maxLength], [1, 255]);
    assert.deepEqual(matches(vaultName, ['\t\n\u2028\ufeff', 'a', ' a ']), [false, true, true]);

    // Any string was documented for a card limit ("" refused): the document gives the pattern validation holds.
    const cardLimits = bodyOf('/api/cards').properties.card_limits.properties;
    for (const window of ['single_transaction', 'daily', 'weekly', 'monthly', 'yearly', 'all_time']) assert.equal(typeof cardLimits[window].pattern, 'string', window);
    assert.deepEqual(
      matches(cardLimits.daily, ['', '0', '0.00', '0.001', '10.5', '250.00', '9999999999999.99', '10000000000000', '1e5']),
      [false, false, false, false, true, true, true, false, false],
    );

    // Before 1970 was documented and refused: the document bounds the years.
    const occurredAt = bodyOf('/v1/sandbox/cards/{cardId}/authorizations').properties.occurred_at;
    assert.equal(occurredAt.format, 'date-time');
    // The whole timestamp, not a year prefix beside `format: date-time`, which a generator cannot satisfy both of.
    assert.deepEqual(
      matches(occurredAt, ['0051-05-28T18:21:01+13:43', '1999-12-31T23:59:59Z', '2000-01-01T00:00:00+14:00', '2026-05-15T12:00:00.000Z', '3000-01-01T00:00:00Z', '2026-02-30T00:00:00Z', '2026-05-15']),
      [false, false, true, true, false, false, false],
    );
  });

  it('renders the reference at /docs with its assets', async () => {
    const page = await app.request('GET', '/docs');
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    assert.match(page.text, /\/openapi\.json/);
    const script = await app.request('GET', '/docs/assets/swagger-ui-bundle.js');
    assert.equal(script.status, 200);
    assert.ok(script.text.length > 100_000);
    // The file is one of the documented names (an enum in /openapi.json): anything else is a 400, as fuzzing found the document promised.
    const outside = await app.request('GET', '/docs/assets/..%2Fpackage.json');
    assert.deepEqual([outside.status, outside.body.error.code, outside.body.error.param], [400, 'validation_failed', 'file']);
    const stylesheet = await app.request('GET', '/docs/assets/swagger-ui.css');
    assert.match(stylesheet.headers.get('content-type') ?? '', /^text\/css/);
    const documented = (await app.request('GET', '/openapi.json')).body.paths['/docs/assets/{file}'].get.responses;
    assert.deepEqual(Object.keys(documented['200'].content).sort(), ['application/javascript; charset=utf-8', 'text/css; charset=utf-8']);
    assert.ok(documented['400'], 'the validation answer is documented on a public route too');
  });
});
