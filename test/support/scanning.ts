import type { Client } from '@temporalio/client';
import type { ChainId } from '../../src/catalogue/service';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { ChainScanCursor, ScannedBlock } from '../../src/monitoring/entities';
import { chainScanFlow, chainScanWorkflowId, scanThroughUpdate } from '../../src/monitoring/flows/chain-scan';
import { scanChain } from '../../src/monitoring/scanner';
import { WorkflowStarter } from '../../src/temporal/starter';
import type { TestApp } from './app';
import { testConfig, testOrm } from './environment';
import { testLogger } from './secret-scan';

/** Each node a test starts is a new chain: the database's one sandbox scan cursor of `chain` starts over. */
export async function resetScanState(chain: ChainId): Promise<void> {
  const em = (await testOrm()).em.fork();
  await em.nativeDelete(ScannedBlock, { chain, environment: 'sandbox' });
  await em.nativeDelete(ChainScanCursor, { chain, environment: 'sandbox' });
}

/** The height the sandbox scan of `chain` has processed, -1 before its first pass. */
export async function sandboxScannedHeight(chain: ChainId): Promise<number> {
  return (await (await testOrm()).em.fork().findOne(ChainScanCursor, { chain, environment: 'sandbox' }))?.height ?? -1;
}

/**
 * Starts sandbox scanning of `chain` on the configuration's task queue, and returns once it has
 * processed the node's current tip: a real node is scanned from the first tip the scanner sees, so
 * nothing may be sent before.
 */
export async function startSandboxScanner(client: Client, config: Record<string, string>, chain: ChainId, tipHeight: () => Promise<number>): Promise<void> {
  await new WorkflowStarter(client, testConfig(config), testLogger('test')).ensureRunning(chainScanFlow, { chain, environment: 'sandbox', intervalSeconds: 0.2 });
  const through = await client.workflow.getHandle(chainScanWorkflowId(chain, 'sandbox')).executeUpdate(scanThroughUpdate, { args: [{ height: await tipHeight(), waitSeconds: 30 }] });
  if (!through.reached) throw new Error(`the ${chain} scanner did not reach the node's tip`);
}

/**
 * Mines `count` blocks of the devnet `chain` and scans them as the service's scanner does, where no scanner
 * workflow runs (time-skipping tests): what reaches a custody address is credited by scanning, as in the
 * service, and a flow that waits for a credit (a sponsorship's fuel) sees it.
 */
export async function mineAndScan(app: TestApp, chain: ChainId, count: number): Promise<void> {
  await mineDevnetBlocks((await testOrm()).em.fork(), chain, count);
  await scanDevnet(app, chain);
}

/** One pass of the sandbox scanner of `chain` up to its tip, as the scanner workflow runs it. */
export async function scanDevnet(app: TestApp, chain: ChainId): Promise<void> {
  const orm = await testOrm();
  await scanChain(
    { chains: app.deps.chains, config: app.deps.config, log: testLogger('scan'), em: () => orm.em.fork(), transaction: (work) => app.deps.starter.transaction(orm.em.fork(), work) },
    { chain, environment: 'sandbox', maxBlocks: 10_000 },
  );
}

/** Ends workflows a test file started on its own task queue, which no worker serves once the file is done. */
export async function terminateWorkflows(client: Client, workflowIds: string[]): Promise<void> {
  for (const id of workflowIds) {
    await client.workflow
      .getHandle(id)
      .terminate('test finished')
      .catch(() => undefined);
  }
}
