import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CHAIN_IDS } from '../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../src/chains/flows/devnet-blocks';
import { chainScanWorkflowId } from '../src/monitoring/flows/chain-scan';
import { createTestOrganization } from './support/app';
import { localTemporal } from './support/environment';
import { eventually } from './support/eventually';
import { missingTool } from './support/missing-tool';
import { freeLoopbackPort } from './support/ports';
import { terminateWorkflows } from './support/scanning';
import { ServiceProcess } from './support/service-process';

const ROOT = path.resolve(__dirname, '../..');

/** The shell blocks of the README's quick start after the first (`npm start`), in order: what a reader pastes. */
async function quickStartBlocks(): Promise<string[]> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const section = /^## Quick start\n([\s\S]*?)^## /m.exec(readme);
  assert.ok(section, 'the README has a "Quick start" section');
  const blocks = [...section[1]!.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((match) => match[1]!);
  assert.match(blocks[0] ?? '', /WEBHOOK_ALLOW_INSECURE_LOOPBACK=true npm start/);
  return blocks.slice(1);
}

/**
 * The README's quick start, pasted as a reader would, against the API and worker processes `npm start` runs
 * (here on a fresh organization whose root key stands in for .data/root-api-key): a webhook verified with
 * standardwebhooks, a confirmed send, a funded card and a paid-out trip.
 */
describe('the README quick start', function () {
  this.timeout(300_000);
  const processes: ServiceProcess[] = [];
  let dir: string;
  let apiUrl: string;

  before(async function () {
    this.timeout(120_000);
    const curl = await new Promise<boolean>((resolve) => execFile('bash', ['-c', 'command -v curl'], (error) => resolve(!error)));
    if (!curl) missingTool(this, 'curl is not installed (the quick start is curl commands)');
    dir = await mkdtemp(path.join(tmpdir(), 'quick-start-'));
    const env = await localTemporal();
    // As on a fresh instance: a block producer or scan another test left on the shared server runs on a task queue
    // no worker polls any more, and the quick start's mining (an Update to the producer) would wait for it forever.
    await terminateWorkflows(env.client, CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]));
    const port = await freeLoopbackPort();
    const shared: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: `quick-start-${randomUUID()}`,
      WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true',
      // As every test's service (testConfig): the send checked, and the chain scanned, every second rather than every
      // five, so the script's polls wait on the chain, not on the next check.
      CHAIN_CHECK_SECONDS: '1',
      CHAIN_SCAN_INTERVAL_SECONDS: '1',
    };
    processes.push(new ServiceProcess('worker', 'worker.js', shared));
    processes.push(new ServiceProcess('api', 'server.js', { ...shared, HOST: '127.0.0.1', PORT: String(port) }));
    apiUrl = `http://127.0.0.1:${port}`;
    await eventually(async () => ((await fetch(`${apiUrl}/readyz`).catch(() => undefined))?.ok ? true : undefined), 'the API ready', 60_000, 200).catch((error: Error) => {
      throw new Error(`${error.message}\n${processes.map((each) => each.log).join('\n')}`);
    });
  });
  after(async () => {
    if (!dir) return;
    const { client } = await localTemporal();
    await terminateWorkflows(client, CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]));
    await Promise.all(processes.map((each) => each.stop()));
    await rm(dir, { recursive: true, force: true });
  });

  it('takes the root key to a verified webhook, a confirmed send, a funded card and a paid-out trip', async () => {
    const organization = await createTestOrganization('Quick start');
    const keyFile = path.join(dir, 'root-api-key');
    await writeFile(keyFile, organization.secret, { mode: 0o600 });
    const receiverPort = String(await freeLoopbackPort());
    const script = (await quickStartBlocks())
      .join('\n')
      .replaceAll('http://127.0.0.1:3000', apiUrl)
      .replaceAll('$(cat .data/root-api-key)', `$(cat '${keyFile}')`)
      .replaceAll('127.0.0.1:4000', `127.0.0.1:${receiverPort}`)
      .replaceAll('listen(4000', `listen(${receiverPort}`);
    // The receiver is the script's background job: it is given a moment for the last deliveries, then stopped.
    const output = await new Promise<string>((resolve, reject) =>
      execFile('bash', ['-c', `${script}\nsleep 3\nkill $(jobs -p)`], { cwd: ROOT, timeout: 240_000 }, (error, stdout, stderr) =>
        error ? reject(new Error(`the quick start failed: ${error.message}\n${stdout}\n${stderr}\n${processes.map((each) => each.log).join('\n')}`)) : resolve(stdout),
      ),
    );
    for (const line of [/^verified evt_\S+ webhook\.test$/m, /^confirmed$/m, /^active$/m, /^2500$/m, /^success$/m, /^149621\.50$/m]) {
      assert.match(output, line);
    }
    for (const type of ['transaction.confirmed', 'card.transaction.completed', 'payouts.withdrawal.success']) {
      assert.match(output, new RegExp(`^verified evt_\\S+ ${type.replace(/\./g, '\\.')}$`, 'm'), `the receiver verified ${type}`);
    }
    assert.doesNotMatch(output, /^rejected/m, 'every delivery carried a valid signature');
  });
});
