import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { eventually } from '../support/eventually';
import { missingTool } from '../support/missing-tool';
import { freeLoopbackPort } from '../support/ports';
import { RestartableWorker } from '../support/worker';

const ROOT = path.resolve(__dirname, '../../..');

/** The shell blocks of docs/lightning.md's "A regtest node, step by step", in order: what a reader pastes. */
async function recipeBlocks(): Promise<string[]> {
  const page = await readFile(path.join(ROOT, 'docs/lightning.md'), 'utf8');
  const section = /^## A regtest node, step by step\n([\s\S]*?)^## /m.exec(page);
  assert.ok(section, 'docs/lightning.md has the recipe');
  return [...section[1]!.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((match) => match[1]!);
}

const bash = (script: string, timeoutMs: number) =>
  new Promise<string>((resolve, reject) =>
    execFile('bash', ['-c', `set -e\n${script}`], { cwd: ROOT, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${error.message}\n${stdout}\n${stderr}`)) : resolve(stdout),
    ),
  );

/**
 * docs/lightning.md's regtest recipe, block after block as written (its folder and ports swapped for free
 * ones), then the service on the variables it wrote: an invoice our node issues, paid by their node with the
 * recipe's own `theirs payinvoice`, and credited.
 */
describe('the regtest recipe of docs/lightning.md', function () {
  this.timeout(600_000);
  let dir: string;
  let blocks: string[];
  let app: TestApp | undefined;
  let worker: RestartableWorker | undefined;

  /** The recipe's text with its folder and ports made this run's. */
  let asRun: (block: string) => string;

  before(async function () {
    for (const tool of ['curl', 'jq']) {
      const found = await new Promise<boolean>((resolve) => execFile('bash', ['-c', `command -v ${tool}`], (error) => resolve(!error)));
      if (!found) missingTool(this, `${tool} is not installed (the recipe uses it)`);
    }
    const tools = await new Promise<boolean>((resolve) => execFile('bash', ['-c', 'source scripts/lib.sh && btcd_path && lnd_path && test -x .tools/lnd/bin/lncli'], { cwd: ROOT }, (error) => resolve(!error)));
    if (!tools) missingTool(this, 'btcd, lnd or lncli is not in .tools (scripts/ensure-tools.sh builds them when Go is present)');
    dir = await mkdtemp(path.join(tmpdir(), 'lnd-recipe-'));
    const ports = new Map<string, string>();
    for (const port of ['18334', '8080', '8081', '10009', '10010', '9735', '9736']) ports.set(port, String(await freeLoopbackPort()));
    // All at once: a free port put in place of one must not be read as another.
    asRun = (block) => block.replace(/\b(18334|8080|8081|10009|10010|9735|9736)\b/g, (written) => ports.get(written)!).replaceAll('$HOME/lnd-regtest', dir);
    blocks = await recipeBlocks();
    assert.equal(blocks.length, 5, 'the tools, btcd and our node, their node and the channel, the variables, stopping');
  });
  after(async () => {
    await worker?.stop();
    await app?.close();
    if (!dir) return;
    const pids = (await bash(`cat '${dir}'/*.pid`, 5_000).catch(() => '')).split(/\s+/).filter(Boolean).map(Number);
    // The recipe's own last block; then each node is given its time to exit (btcd hangs for good when its folder goes
    // first), and killed if it takes longer.
    await bash(asRun([blocks[0]!, blocks[4]!].join('\n')), 60_000).catch(() => undefined);
    const running = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await eventually(async () => (pids.some(running) ? undefined : true), 'the recipe nodes to exit', 30_000, 250).catch(() => pids.filter(running).forEach((pid) => process.kill(pid, 'SIGKILL')));
    await rm(dir, { recursive: true, force: true });
  });

  it('brings up btcd, two LND nodes and a channel whose variables make our node the sandbox node: an invoice paid from their node is credited', async () => {
    const output = await bash(asRun(blocks.slice(0, 4).join('\n')), 480_000);
    const variables = Object.fromEntries(
      output
        .split('\n')
        .filter((line) => line.startsWith('LIGHTNING_LND_'))
        .map((line) => line.split('=', 2) as [string, string]),
    );
    assert.deepEqual(Object.keys(variables).sort(), ['LIGHTNING_LND_SANDBOX_MACAROON_PATH', 'LIGHTNING_LND_SANDBOX_NETWORK', 'LIGHTNING_LND_SANDBOX_REST_URL', 'LIGHTNING_LND_SANDBOX_TLS_CERT_PATH']);

    const config = { TEMPORAL_TASK_QUEUE: `lnd-recipe-${randomUUID()}`, ...variables };
    app = await startTestApp({ config });
    worker = new RestartableWorker(config.TEMPORAL_TASK_QUEUE, config);
    await worker.start();
    const org = await createTestOrganization('Regtest recipe');
    const created = await app.request('POST', '/api/lightning/invoices', { key: org.secret, body: { amount: 2_500, description: 'from the recipe', reference: randomUUID() } });
    assert.equal(created.status, 201, created.text);
    assert.ok((created.body.request as string).startsWith('lnbcrt25u'), created.body.request);

    await bash(asRun(`${blocks[0]}\ntheirs payinvoice --force ${created.body.request}`), 120_000);
    await eventually(
      async () => ((await app!.request('GET', `/api/lightning/invoices/${created.body.id}`, { key: org.secret })).body.data.status === 'paid' ? true : undefined),
      'the invoice paid from their node to be credited',
      60_000,
      250,
    );
    const balances = await app.request('GET', '/v1/balances', { key: org.secret });
    assert.equal(balances.body.data.find((balance: { unit: string }) => balance.unit === 'sat').available, '2500');
  });
});
