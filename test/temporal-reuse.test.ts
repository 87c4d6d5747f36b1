import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * `npm start` reuses a Temporal server already on its port only when it is the one started for its own data
 * folder (scripts/lib.sh temporal_dev_reusable): a second instance on the same port stops with one line
 * instead of sharing a namespace and task queue with another database. Against a real dev server.
 */
const ROOT = path.resolve(__dirname, '../..');

interface ShellResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Bash code with scripts/lib.sh sourced and `args` as "$@"; its status and output, whatever the status. */
function libShell(code: string, ...args: string[]): Promise<ShellResult> {
  return new Promise((resolve) =>
    execFile('bash', ['-c', `source "${ROOT}/scripts/lib.sh"; ${code}`, 'start', ...args], { cwd: ROOT, env: { ...process.env, LIB_SCRIPT_NAME: 'start' } }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout: stdout.trim(), stderr: stderr.trim() }),
    ),
  );
}

const decide = (dbfile: string, port: number) =>
  libShell('if temporal_dev_reusable "$1" "$2"; then echo reuse; else echo start; fi', dbfile, String(port));

describe('npm start and a Temporal server already on its port', function () {
  this.timeout(120_000);
  let dir: string;
  let port: number;
  let pid = 0;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'temporal-reuse-'));
    const ports = await libShell('free_port; free_port');
    [port] = ports.stdout.split('\n').map(Number) as [number];
    const uiPort = Number(ports.stdout.split('\n')[1]);
    const started = await libShell(
      'temporal_dev_start "$@" >&2 && echo "$TEMPORAL_DEV_PID"',
      path.join(dir, 'first/temporal/temporal.db'),
      String(port),
      String(uiPort),
      path.join(dir, 'first/logs/temporal.log'),
    );
    assert.equal(started.code, 0, started.stderr);
    pid = Number(started.stdout);
  });

  after(async () => {
    if (pid) process.kill(pid, 'SIGTERM');
    await rm(dir, { recursive: true, force: true });
  });

  it('reuses the server started for the same data folder', async () => {
    const result = await decide(path.join(dir, 'first/temporal/temporal.db'), port);
    assert.deepEqual([result.code, result.stdout], [0, 'reuse'], result.stderr);
  });

  it("stops a second instance on the same port with one line naming what to set, rather than sharing the first one's server", async () => {
    const result = await decide(path.join(dir, 'second/temporal/temporal.db'), port);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, '', 'it neither reuses nor starts a server');
    const lines = result.stderr.split('\n');
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0]!, /already answers on 127\.0\.0\.1:\d+ .*set TEMPORAL_PORT and TEMPORAL_UI_PORT .* or TEMPORAL_ADDRESS/);
  });

  it("is not fooled by a pid file naming another folder's server (a copied data folder, a recycled pid)", async () => {
    const result = await libShell(
      'mkdir -p "$(dirname "$2")" && cp "$1.pid" "$2.pid" && if temporal_dev_reusable "$2" "$3"; then echo reuse; fi',
      path.join(dir, 'first/temporal/temporal.db'),
      path.join(dir, 'copy/temporal/temporal.db'),
      String(port),
    );
    assert.equal(result.code, 1);
    assert.match(result.stderr, /not started for .*copy\/temporal\/temporal\.db/);
  });

  it('starts its own server when nothing answers on the port', async () => {
    const free = Number((await libShell('free_port')).stdout);
    const result = await decide(path.join(dir, 'second/temporal/temporal.db'), free);
    assert.deepEqual([result.code, result.stdout], [0, 'start'], result.stderr);
  });
});
