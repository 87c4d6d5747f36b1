import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, makeTelemetryFilterString, Runtime } from '@temporalio/worker';
import { loadConfig, type Config } from '../../src/config';
import { journalMismatches } from '../../src/custody/journal';
import { createOrm, migrate, type Orm } from '../../src/db/orm';
import { SEARCH_ATTRIBUTE_KEYS } from '../../src/temporal/search-attributes';
import { watchNodeCallsInTransactions } from './node-calls';

/**
 * Shared, lazily started real components: one migrated PostgreSQL database (the throwaway one
 * scripts/test.sh made), one Temporal dev server for API tests, one time-skipping server for
 * workflow tests. Each test works inside its own organization, so tests do not see each other.
 */
// Workers log their state changes at INFO, and the SDK core warns that the time-skipping server lacks
// newer capabilities; tests only want what goes wrong.
Runtime.install({
  // ERROR, not WARN: tests that keep a provider down on purpose make the SDK warn of every failed activity attempt.
  logger: new DefaultLogger('ERROR'),
  telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR', other: 'ERROR' }), forward: {} } },
});

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the suite with \`npm test\`, which provisions it.`);
  return value;
}

/** Loopback webhook targets on: the suite's receivers (test/support/webhook-receiver.ts) listen on 127.0.0.1. */
export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({ LOG_LEVEL: 'silent', NODE_ENV: 'test', WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true', ...process.env, ...overrides });
}

let orm: Promise<Orm> | undefined;
export function testOrm(): Promise<Orm> {
  orm ??= (async () => {
    const instance = await createOrm(requiredEnv('DATABASE_URL'), 20);
    await migrate(instance);
    return instance;
  })();
  return orm;
}

let local: Promise<TestWorkflowEnvironment> | undefined;
/** A real Temporal dev server (schedules, search attributes, visibility): for API and setup tests. */
export function localTemporal(): Promise<TestWorkflowEnvironment> {
  local ??= TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: requiredEnv('TEMPORAL_CLI_PATH') },
      searchAttributes: SEARCH_ATTRIBUTE_KEYS,
      extraArgs: ['--log-level', 'error'],
    },
  });
  return local;
}

let timeSkipping: Promise<TestWorkflowEnvironment> | undefined;
/**
 * The time-skipping test server of the current test file: 24 h timers pass in moments. Each file
 * releases it when done (`after(releaseTimeSkippingTemporal)`): a workflow a file leaves behind
 * (an expiry timer firing into a task queue no worker serves any more) would otherwise hold the
 * clock of every later file.
 */
export function timeSkippingTemporal(): Promise<TestWorkflowEnvironment> {
  timeSkipping ??= TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: requiredEnv('TEMPORAL_TEST_SERVER_PATH') } },
  });
  return timeSkipping;
}

export async function releaseTimeSkippingTemporal(): Promise<void> {
  const released = timeSkipping;
  timeSkipping = undefined;
  await released?.then((env) => env.teardown());
}

/** Every configured node (anvil, btcd) call made inside a database transaction, by any test of the suite. */
const nodeCallsInTransactions = watchNodeCallsInTransactions();

export const mochaHooks = {
  /**
   * Every test ends with the custody journal whole (each wallet and address balance row is the sum
   * of its entries) and with no node call made inside a database transaction.
   */
  async afterEach() {
    const nodeCalls = nodeCallsInTransactions.calls.splice(0);
    if (nodeCalls.length > 0) throw new Error(`a chain node was called inside a database transaction:\n${nodeCalls.join('\n')}`);
    if (!orm) return;
    const mismatches = await journalMismatches((await orm).em.fork());
    if (mismatches.length > 0) throw new Error(`custody balance rows differ from their journal: ${JSON.stringify(mismatches)}`);
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await Promise.all([
      local?.then((env) => env.teardown()),
      timeSkipping?.then((env) => env.teardown()),
      orm?.then((instance) => instance.close()),
    ]);
  },
};
