import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from './support/eventually';
import { missingTool } from './support/missing-tool';
import { freeLoopbackPort } from './support/ports';

const ROOT = path.resolve(__dirname, '../..');
const PORT_VARIABLES = ['PORT', 'PG_PORT', 'TEMPORAL_PORT', 'TEMPORAL_UI_PORT'] as const;

interface Finished {
  code: number;
  stdout: string;
  stderr: string;
}

/** A command run in the checkout to its end, whatever its status. */
function run(command: string, env: NodeJS.ProcessEnv, timeout = 120_000): Promise<Finished> {
  return new Promise((resolve) =>
    execFile('bash', ['-c', command], { cwd: ROOT, env, timeout }, (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })),
  );
}

/** The README's line that starts a second instance on one machine (section "Ports, and a second instance on one machine"). */
async function secondInstanceLine(): Promise<string> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const section = /^### Ports, and a second instance on one machine\n([\s\S]*?)^##/m.exec(readme);
  assert.ok(section, 'the README has a section on ports and a second instance');
  const line = /^```sh\n(.*npm start)\n```/m.exec(section[1]!)?.[1];
  assert.ok(line, 'the section shows the line that starts a second instance');
  return line;
}

/** The README's line with each of its settings replaced: it must set the four ports and DATA_DIR, and nothing else. */
function withSettings(line: string, values: Record<string, string>): string {
  const names = [...line.matchAll(/\b([A-Z_]+)=\S+/g)].map((match) => match[1]!);
  assert.deepEqual([...names].sort(), Object.keys(values).sort(), 'the README line sets every port variable and DATA_DIR');
  return line.replace(/\b([A-Z_]+)=\S+/g, (_, name: string) => `${name}=${values[name]}`);
}

/** An `npm start` in the background, in a process group of its own (Ctrl-C reaches the whole group), its output kept. */
class Start {
  private readonly child: ChildProcess;
  output = '';
  readonly exited: Promise<number | null>;

  constructor(
    command: string,
    env: NodeJS.ProcessEnv,
    readonly dataDir: string,
  ) {
    this.child = spawn('bash', ['-c', command], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => (this.output += chunk.toString());
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.exited = once(this.child, 'exit').then(([code]) => code as number | null);
  }

  async ready(): Promise<void> {
    let exited = false;
    void this.exited.then(() => (exited = true));
    await eventually(
      async () => {
        if (exited) throw new Error(`npm start exited:\n${this.output}`);
        return this.output.includes('press Ctrl-C to stop') || undefined;
      },
      'npm start ready',
      300_000,
      500,
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${this.output}`);
    });
  }

  async key(): Promise<string> {
    return (await readFile(path.join(this.dataDir, 'root-api-key'), 'utf8')).trim();
  }

  /** Ctrl-C, then until the script itself is gone (npm may exit before it has stopped what it started). */
  async stop(): Promise<void> {
    const record = await readFile(path.join(this.dataDir, 'instance.json'), 'utf8').then((text) => JSON.parse(text) as { pid: number }, () => undefined);
    try {
      process.kill(-this.child.pid!, 'SIGINT');
    } catch {
      // Already gone.
    }
    await this.exited;
    if (record) {
      await eventually(
        async () => {
          try {
            process.kill(record.pid, 0);
            return undefined;
          } catch {
            return true;
          }
        },
        'npm start stopped',
        120_000,
        500,
      );
    }
  }
}

async function status(url: string, key: string): Promise<number> {
  return (await fetch(`${url}/v1/api-keys/me`, { headers: { Authorization: `Bearer ${key}` } })).status;
}

/**
 * Two `npm start`s on one machine, each started by the README's line for a second instance (with free ports and a
 * data folder of its own): each answers its own root key and refuses the other's, a third start on a PORT the first
 * holds stops at once without printing anyone's URL or key, and the CLI in the checkout reaches the instance whose
 * DATA_DIR it is given, without DATABASE_URL.
 */
describe('two instances of npm start on one machine', function () {
  this.timeout(600_000);
  const starts: Start[] = [];
  const dirs: string[] = [];
  let env: NodeJS.ProcessEnv;
  let line: string;
  let first: Start, second: Start;
  let firstUrl: string, secondUrl: string;
  let secondPgPort: number;

  /** Free ports for the four variables, and a fresh data folder the postgres user can reach (when started as root). */
  async function settings(overrides: Record<string, string> = {}): Promise<Record<string, string>> {
    const dir = await mkdtemp(path.join(tmpdir(), 'second-instance-'));
    await chmod(dir, 0o755);
    dirs.push(dir);
    const values: Record<string, string> = { DATA_DIR: dir };
    for (const name of PORT_VARIABLES) values[name] = String(await freeLoopbackPort());
    return { ...values, ...overrides };
  }

  before(async function () {
    this.timeout(600_000);
    const tools = await run(`source scripts/lib.sh; source scripts/postgres.sh; temporal_cli_path && pg_bin_dir`, process.env);
    if (tools.code !== 0) missingTool(this, 'the Temporal CLI or the PostgreSQL server binaries are missing (npm start runs both)');
    // Both starts share this checkout's dist/: were it not the build of the sources as they are, npm start would build
    // again under the other test files' processes. scripts/test.sh records the build it made.
    const inputs = await run('node scripts/build-inputs.cjs', process.env);
    const recorded = await readFile(path.join(ROOT, 'dist/.build-inputs'), 'utf8').catch(() => '');
    assert.equal(recorded.trim(), inputs.stdout.trim(), 'dist/ is the build of the sources as they are (run this file through scripts/test.sh)');
    // As a reader's shell: none of the test run's settings.
    env = { ...process.env, LOG_LEVEL: 'warn' };
    for (const name of Object.keys(env)) {
      if (/^(DATABASE_URL|TEST_|TEMPORAL_(ADDRESS|NAMESPACE|TASK_QUEUE)$|NODE_ENV$|HOST$|MASTER_KEY|SEED_MASTER_KEY|WEBHOOK_)/.test(name)) delete env[name];
    }
    line = await secondInstanceLine();
    const firstSettings = await settings();
    const secondSettings = await settings();
    secondPgPort = Number(secondSettings.PG_PORT);
    first = new Start(withSettings(line, firstSettings), env, firstSettings.DATA_DIR!);
    second = new Start(withSettings(line, secondSettings), env, secondSettings.DATA_DIR!);
    starts.push(first, second);
    firstUrl = `http://127.0.0.1:${firstSettings.PORT}`;
    secondUrl = `http://127.0.0.1:${secondSettings.PORT}`;
    await Promise.all([first.ready(), second.ready()]);
  });

  after(async () => {
    await Promise.all(starts.map((start) => start.stop()));
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it('starts each from the build as it is, and each prints its own URL and key', async () => {
    for (const [start, url] of [
      [first, firstUrl],
      [second, secondUrl],
    ] as const) {
      assert.match(start.output, /nothing changed since the last build .*: not building/);
      assert.ok(start.output.includes(`API:          ${url}\n`), start.output);
      assert.ok(start.output.includes(await start.key()), 'the key printed is the one in its data folder');
    }
  });

  it("answers each instance's own key and refuses the other's", async () => {
    const [firstKey, secondKey] = [await first.key(), await second.key()];
    assert.notEqual(firstKey, secondKey);
    assert.deepEqual(
      [await status(firstUrl, firstKey), await status(firstUrl, secondKey), await status(secondUrl, secondKey), await status(secondUrl, firstKey)],
      [200, 401, 200, 401],
    );
  });

  it("stops a start on the PORT another instance holds at once, naming PORT, and never prints that instance's URL as its own", async () => {
    const thirdSettings = await settings({ PORT: new URL(firstUrl).port });
    const third = new Start(withSettings(line, thirdSettings), env, thirdSettings.DATA_DIR!);
    starts.push(third);
    const code = await third.exited;
    assert.equal(code, 1, third.output);
    assert.match(third.output, new RegExp(`port ${new URL(firstUrl).port} \\(PORT, the API\\) is already in use on 127\\.0\\.0\\.1.*set PORT to a free port`));
    assert.doesNotMatch(third.output, /API: |press Ctrl-C|building/);
    assert.equal(await status(firstUrl, await first.key()), 200, 'the first instance serves on');
  });

  it("runs the CLI against the instance whose DATA_DIR it is given, without DATABASE_URL, and says what to set once it is stopped", async () => {
    const created = await run(`DATA_DIR='${second.dataDir}' npm run cli -- org:create --name Second`, env);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, /using the settings of the npm start that recorded/);
    const { api_key } = JSON.parse(created.stdout.slice(created.stdout.indexOf('{'))) as { api_key: { secret: string } };
    assert.deepEqual([await status(secondUrl, api_key.secret), await status(firstUrl, api_key.secret)], [200, 401]);

    await second.stop();
    const stopped = await run(`DATA_DIR='${second.dataDir}' npm run cli -- ledger:verify`, env);
    assert.equal(stopped.code, 1);
    assert.ok(stopped.stderr.includes(`is not running: start it again, or set DATABASE_URL=postgresql://postgres@127.0.0.1:${secondPgPort}/custody`), stopped.stderr);
  });
});
