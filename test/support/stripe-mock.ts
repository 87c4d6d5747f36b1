import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import { eventually } from './eventually';
import { freeLoopbackPort } from './ports';
import { missingTool } from './missing-tool';

const PROJECT_ROOT = path.resolve(__dirname, '../../..');

export interface StripeMock {
  /** What the app and the worker need to take Stripe Issuing from this stripe-mock (a test secret key, a webhook secret). */
  config: Record<string, string>;
  /** The webhook signing secret in `config`, to sign test events with. */
  webhookSecret: string;
  /** stripe-mock's own log: every request it took and whether its validation accepted it. */
  output: () => string;
  stop: () => Promise<void>;
}

/** The stripe-mock binary scripts/ensure-tools.sh installs (STRIPE_MOCK_PATH wins), or why there is none. */
function findStripeMock(): { path: string } | { missing: string } {
  try {
    const found = execFileSync('bash', ['-c', 'source scripts/lib.sh && stripe_mock_path'], { cwd: PROJECT_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return { path: found };
  } catch {
    return { missing: 'no stripe-mock at $STRIPE_MOCK_PATH or .tools/stripe-mock/bin/stripe-mock (scripts/ensure-tools.sh installs it when Go is present)' };
  }
}

/** Starts stripe-mock (HTTP on a free 127.0.0.1 port) and waits until it answers. */
async function startStripeMock(binary: string): Promise<StripeMock> {
  const port = await freeLoopbackPort();
  // Its HTTPS listener is always on (default :12112): given a free loopback port of its own, so that runs side by side never collide.
  const httpsPort = await freeLoopbackPort();
  const child = spawn(binary, ['-http-addr', `127.0.0.1:${port}`, '-https-addr', `127.0.0.1:${httpsPort}`, '-verbose'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-200_000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = once(child, 'exit');
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  };
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`stripe-mock exited with ${child.exitCode}: ${output}`);
        // Any HTTP answer (401 without a key) means it listens.
        return fetch(`http://127.0.0.1:${port}/v1/issuing/cards`, { signal: AbortSignal.timeout(2_000) }).then(
          () => true,
          () => undefined,
        );
      },
      'stripe-mock to answer',
      30_000,
      100,
    );
  } catch (error) {
    await stop();
    throw error;
  }
  const webhookSecret = `whsec_${randomBytes(24).toString('base64')}`;
  return {
    config: {
      // stripe-mock takes any key that looks like one (letters and digits after sk_test_); this one is no secret.
      STRIPE_ISSUING_SECRET_KEY: 'sk_test_stripemock',
      STRIPE_ISSUING_WEBHOOK_SECRET: webhookSecret,
      STRIPE_API_HOST: '127.0.0.1',
      STRIPE_API_PORT: String(port),
      STRIPE_API_PROTOCOL: 'http',
    },
    webhookSecret,
    output: () => output,
    stop,
  };
}

/**
 * stripe-mock for a test file, or null when it is not installed: then a test that needs it calls
 * `needStripeMock`. Under CI a missing stripe-mock fails here instead: CI runs every test.
 */
export async function startStripeMockIfInstalled(): Promise<StripeMock | null> {
  const found = findStripeMock();
  if ('missing' in found) {
    if (process.env.CI) throw new Error(`stripe-mock is required under CI: ${found.missing}`);
    return null;
  }
  return startStripeMock(found.path);
}

/** The running stripe-mock, or skips the test with the reason printed (only off CI: under CI the start already failed). */
export function needStripeMock(context: Mocha.Context, mock: StripeMock | null): StripeMock {
  return mock ?? missingTool(context, 'stripe-mock not installed (scripts/ensure-tools.sh installs it when Go is present)');
}
