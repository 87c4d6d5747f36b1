import type { ChainId } from '../../src/catalogue/service';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization, type TestResponse } from './app';
import { localTemporal } from './environment';
import { resetScanState, startSandboxScanner, terminateWorkflows } from './scanning';
import { createTestWorker } from './worker';

/** The service a chain test file runs against a real node, and the organization it calls the API as. */
export interface ScannedService {
  app: TestApp;
  org: TestOrganization;
  /** The API, as the organization's key. */
  call: (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<TestResponse>;
  /** Stops the scanner, the worker and the app, and clears the chain's scan state for the next file. */
  stop: () => Promise<void>;
}

/**
 * Starts the API, a worker on the configuration's own task queue and the sandbox scanner of `chain`
 * on a node a test started (a new chain: its scan state starts over), caught up with the node's tip,
 * and creates the organization `name`. What every chain test file starts in `before`.
 */
export async function startScannedService(chain: ChainId, name: string, config: Record<string, string>, tipHeight: () => Promise<number>): Promise<ScannedService> {
  const temporal = await localTemporal();
  await resetScanState(chain);
  const app = await startTestApp({ config });
  const { worker } = await createTestWorker(temporal, config.TEMPORAL_TASK_QUEUE, config);
  const running = worker.run();
  const stop = async () => {
    await terminateWorkflows(temporal.client, [chainScanWorkflowId(chain, 'sandbox')]);
    worker.shutdown();
    await running;
    await resetScanState(chain);
    await app.close();
  };
  try {
    await startSandboxScanner(temporal.client, config, chain, tipHeight);
    const org = await createTestOrganization(name);
    const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => app.request(method, path, { key: org.secret, body, ...(headers ? { headers } : {}) });
    return { app, org, call, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
