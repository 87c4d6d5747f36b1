import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Stripe from 'stripe';
import { eventually } from './eventually';
import { freeLoopbackPort } from './ports';
import { missingTool } from './missing-tool';

const PROJECT_ROOT = path.resolve(__dirname, '../../..');

export interface StripeMock {
  /** What the app and the worker need to take Stripe Issuing from this stripe-mock (a test secret key, both endpoints' secrets, test mode). */
  config: Record<string, string>;
  /** The real-time authorization endpoint's signing secret in `config`, to sign authorization requests with. */
  authorizationSecret: string;
  /** The event endpoint's signing secret in `config`, to sign the events after a decision with. */
  eventSecret: string;
  /** stripe-mock's fixture of the object at `path` (GET): Stripe's own example of it, from its OpenAPI document. */
  fixture: <T>(path: string) => Promise<T>;
  /**
   * Restarts stripe-mock (same ports) serving Stripe's fixtures with the balance's `issuing.available` at `available`
   * USD cents (the bundled balance has no `issuing`); null when the bundled fixtures are not installed
   * (scripts/ensure-tools.sh keeps them in .tools/stripe-mock/openapi; STRIPE_MOCK_FIXTURES_PATH wins).
   */
  serveIssuingBalance: ((available: number) => Promise<void>) | null;
  /** stripe-mock's own log: every request it took and whether its validation accepted it. */
  output: () => string;
  stop: () => Promise<void>;
}

/** The stripe-mock binary scripts/ensure-tools.sh installs (STRIPE_MOCK_PATH wins), or why there is none. */
function findStripeMock(): { path: string } | { missing: string } {
  const found = libPath('stripe_mock_path');
  return found ? { path: found } : { missing: 'no stripe-mock at $STRIPE_MOCK_PATH or .tools/stripe-mock/bin/stripe-mock (scripts/ensure-tools.sh installs it when Go is present)' };
}

/** What a function of scripts/lib.sh prints (a tool's path), or null when it fails (the tool is missing). */
function libPath(name: string): string | null {
  try {
    return execFileSync('bash', ['-c', `source scripts/lib.sh && ${name}`], { cwd: PROJECT_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

/** One stripe-mock process on the given ports, with the fixtures at `fixtures` (its bundled ones when null), once it answers. */
async function runStripeMock(binary: string, ports: { http: number; https: number }, fixtures: string | null, keep: (chunk: Buffer) => void): Promise<() => Promise<void>> {
  const child = spawn(
    binary,
    ['-http-addr', `127.0.0.1:${ports.http}`, '-https-addr', `127.0.0.1:${ports.https}`, '-verbose', ...(fixtures ? ['-fixtures', fixtures] : [])],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const record = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
    keep(chunk);
  };
  child.stdout.on('data', record);
  child.stderr.on('data', record);
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
        return fetch(`http://127.0.0.1:${ports.http}/v1/issuing/cards`, { signal: AbortSignal.timeout(2_000) }).then(
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
  return stop;
}

/**
 * Stripe's own fixtures (the ones stripe-mock bundles) with the balance carrying `issuing.available` as Stripe's
 * OpenAPI document defines it (`balance.issuing`: a `balance_detail`, its `available` a list of `balance_amount`),
 * written to a file of `folder` for `-fixtures`. Every other object stays as bundled.
 */
async function fixturesWithIssuingBalance(bundled: string, folder: string, available: number): Promise<string> {
  const fixtures = JSON.parse(await readFile(bundled, 'utf8')) as { resources: { balance: Stripe.Balance } };
  fixtures.resources.balance.issuing = { available: [{ amount: available, currency: 'usd', source_types: { card: available } }] };
  const file = path.join(folder, `fixtures-issuing-${available}.json`);
  await writeFile(file, JSON.stringify(fixtures));
  return file;
}

/** Starts stripe-mock (HTTP on a free 127.0.0.1 port) and waits until it answers. */
async function startStripeMock(binary: string): Promise<StripeMock> {
  // Its HTTPS listener is always on (default :12112): given a free loopback port of its own, so that runs side by side never collide.
  const ports = { http: await freeLoopbackPort(), https: await freeLoopbackPort() };
  const port = ports.http;
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-200_000));
  let stopRunning = await runStripeMock(binary, ports, null, keep);
  const bundledFixtures = libPath('stripe_mock_fixtures_path');
  let fixturesFolder: string | null = null;
  const stop = async () => {
    await stopRunning();
    if (fixturesFolder) await rm(fixturesFolder, { recursive: true, force: true });
  };
  const serveIssuingBalance = bundledFixtures
    ? async (available: number) => {
        fixturesFolder ??= await mkdtemp(path.join(os.tmpdir(), 'stripe-mock-fixtures-'));
        const fixtures = await fixturesWithIssuingBalance(bundledFixtures, fixturesFolder, available);
        // stripe-mock keeps no state: the same ports, so the clients already made of `config` reach the new one.
        await stopRunning();
        stopRunning = await runStripeMock(binary, ports, fixtures, keep);
      }
    : null;
  const authorizationSecret = `whsec_${randomBytes(24).toString('base64')}`;
  const eventSecret = `whsec_${randomBytes(24).toString('base64')}`;
  // stripe-mock takes any key that looks like one (letters and digits after sk_test_); this one is no secret.
  const secretKey = 'sk_test_stripemock';
  const fixture = async <T>(route: string): Promise<T> => {
    const response = await fetch(`http://127.0.0.1:${port}${route}`, { headers: { authorization: `Bearer ${secretKey}` } });
    if (!response.ok) throw new Error(`stripe-mock GET ${route}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  };
  return {
    config: {
      STRIPE_ISSUING_SECRET_KEY: secretKey,
      STRIPE_ISSUING_AUTHORIZATION_SECRET: authorizationSecret,
      STRIPE_ISSUING_WEBHOOK_SECRET: eventSecret,
      // stripe-mock is Stripe's test mode: its keys and its objects' livemode.
      STRIPE_ISSUING_MODE: 'test',
      STRIPE_API_HOST: '127.0.0.1',
      STRIPE_API_PORT: String(port),
      STRIPE_API_PROTOCOL: 'http',
    },
    authorizationSecret,
    eventSecret,
    fixture,
    serveIssuingBalance,
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

/** stripe-mock's log of the requests to `route` (method and path line, then its data and verdict), oldest first. */
const requestsTo = (mock: StripeMock, method: string, route: string) =>
  mock
    .output()
    .split(/(?=Request: )/)
    .filter((entry) => entry.startsWith(`Request: ${method} ${route}\n`));

/** The first request to `route` stripe-mock took (status 200) whose logged data holds every fragment, once it has come. */
export const acceptedRequestTo = (mock: StripeMock, method: string, route: string, ...fragments: string[]) =>
  eventually(
    async () => requestsTo(mock, method, route).find((entry) => fragments.every((fragment) => entry.includes(fragment)) && /status=200/.test(entry)),
    `${method} ${route} with ${fragments.join(', ')}`,
  );
