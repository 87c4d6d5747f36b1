import { randomUUID } from 'node:crypto';
import { applyBalanceEntry } from '../../src/balances/service';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from './app';
import { localTemporal, testOrm } from './environment';
import { startStripeMockIfInstalled, type StripeMock } from './stripe-mock';
import { createTestWorker } from './worker';

/** Live cards through Stripe Issuing for a test file: stripe-mock (when installed), the app and a worker on a task queue of their own, an organization with a live key. */
export interface StripeIssuingHarness {
  stripeMock: StripeMock | null;
  app: TestApp;
  /** The app's configuration (stripe-mock's included), to start another app like it. */
  config: Record<string, string>;
  taskQueue: string;
  org: TestOrganization;
  /** The organization's live key, scope `*`. */
  live: string;
  stop: () => Promise<void>;
}

/** Starts the harness; the organization's live USD balance holds 500 dollars to fund cards with. */
export async function startStripeIssuingHarness(name: string, extraConfig: Record<string, string> = {}): Promise<StripeIssuingHarness> {
  const stripeMock = await startStripeMockIfInstalled();
  const taskQueue = `stripe-issuing-${randomUUID()}`;
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, ...extraConfig, ...stripeMock?.config };
  const app = await startTestApp({ config });
  const { worker } = await createTestWorker(await localTemporal(), taskQueue, stripeMock?.config ?? {});
  const running = worker.run();
  const org = await createTestOrganization(name);
  const live = (await org.key(['*'], 'live')).secret;
  await (await testOrm()).em.fork().transactional((tx) =>
    applyBalanceEntry(tx, { organizationId: org.organizationId, environment: 'live', currency: 'usd', kind: 'credit', amount: 50_000n, reference: { type: 'sandbox_credit', id: randomUUID() } }),
  );
  return {
    stripeMock,
    app,
    config,
    taskQueue,
    org,
    live,
    stop: async () => {
      worker.shutdown();
      await running;
      await app.close();
      await stripeMock?.stop();
    },
  };
}
