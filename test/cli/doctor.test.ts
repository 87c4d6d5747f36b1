import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { Hex } from 'viem';
import { startupSelfTest, type CheckResult } from '../../src/cli/doctor';
import { ConfigError } from '../../src/config';
import { createLogger } from '../../src/logger';
import {
  deployAnvilPriceFeed,
  deployAnvilSequencerUptimeFeed,
  deployAnvilToken,
  feedUsd,
  nowSeconds,
  reportAnvilSequencerStatus,
  setAnvilPriceRound,
  startAnvil,
  type Anvil,
} from '../support/anvil';
import { cli } from '../support/cli';
import { localTemporal, ownDatabase, TEST_MASTER_KEY, testConfig } from '../support/environment';
import { startLoneLnd, type Lnd } from '../support/lnd';
import { missingTool } from '../support/missing-tool';
import { needStripeMock, startStripeMockIfInstalled, type StripeMock } from '../support/stripe-mock';


interface Report {
  ok: boolean;
  summary: { ok: number; warn: number; fail: number };
  checks: CheckResult[];
}

/** Everything the doctor printed in this file: none of the secrets it was given may be in it. */
const printed: string[] = [];
/**
 * The doctor's database: one of this file's own, as its stored-rows check reads every sealed row, and other files'
 * rows in this process's database are sealed under keys of theirs (a working configuration is judged on its own rows).
 */
let database: Awaited<ReturnType<typeof ownDatabase>>;

/** `npm run cli -- doctor ...` in a process of its own: its exit code and what it printed (kept for the secret check). */
async function doctor(args: string[], env: Record<string, string | undefined>): Promise<{ code: number; stdout: string }> {
  const { code, stdout, stderr } = await cli(['doctor', ...args], database.url, env).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
  );
  printed.push(stdout, stderr);
  assert.equal(stderr, '', 'nothing on stderr');
  return { code, stdout };
}

async function doctorJson(env: Record<string, string | undefined>, args: string[] = []): Promise<{ code: number; report: Report; check: (name: string) => CheckResult }> {
  // Each check's own wait, unless the test sets it: generous, so that a working part on a busy machine (the whole suite
  // at load 25 beside it) is judged ok, not timed out.
  const { code, stdout } = await doctor(['--json', ...(args.includes('--timeout-ms') ? [] : ['--timeout-ms', '30000']), ...args], env);
  const report = JSON.parse(stdout) as Report;
  const check = (name: string) => report.checks.find((each) => each.check === name) ?? assert.fail(`no check ${name} in ${report.checks.map((each) => each.check).join(', ')}`);
  return { code, report, check };
}

/** A TCP server that takes connections and never answers: a node that hangs. */
async function silentServer(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets: Socket[] = [];
  const server: Server = createServer((socket) => void sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('CLI doctor', () => {
  let base: Record<string, string>;
  let mainnet: Anvil;
  let token: Hex;
  let ethFeed: Hex;
  let btcFeed: Hex;
  let stripe: StripeMock | null;

  before(async () => {
    database = await ownDatabase('doctor');
    const temporal = await localTemporal();
    stripe = await startStripeMockIfInstalled();
    mainnet = await startAnvil({ chainId: 1 });
    token = await deployAnvilToken(mainnet, 6);
    ethFeed = await deployAnvilPriceFeed(mainnet);
    btcFeed = await deployAnvilPriceFeed(mainnet);
    await setAnvilPriceRound(mainnet, ethFeed, feedUsd(3000), nowSeconds() - 60);
    // Older than its heartbeat (3600 s) and the margin (600 s).
    await setAnvilPriceRound(mainnet, btcFeed, feedUsd(65_000), nowSeconds() - 3600 - 600 - 120);
    base = {
      NODE_ENV: 'test',
      TEMPORAL_ADDRESS: temporal.connection.options.address,
      CHAIN_NODE_ETHEREUM_LIVE: mainnet.url,
      CHAIN_TOKENS_ETHEREUM_LIVE: `USDC_ETH=${token}`,
      PRICE_FEEDS_LIVE: `ETH=${ethFeed}:3600`,
    };
  });
  after(async () => {
    await mainnet?.stop();
    await stripe?.stop();
    await database?.drop();
    // What the doctor was given and must never print: the signing secrets, the Stripe key, the master key.
    const all = printed.join('\n');
    for (const secret of [TEST_MASTER_KEY, 'sk_test_stripemock', ...(stripe ? [stripe.authorizationSecret, stripe.eventSecret] : [])]) assert.ok(!all.includes(secret), 'a secret was printed');
  });

  it('passes every check of a working configuration, and --json says so check by check', async function () {
    const mock = needStripeMock(this, stripe);
    const { code, report, check } = await doctorJson({ ...base, ...mock.config });
    assert.equal(code, 0, JSON.stringify(report.checks.filter((each) => each.status === 'fail')));
    assert.equal(report.ok, true);
    assert.deepEqual(report.summary, {
      ok: report.checks.filter((each) => each.status === 'ok').length,
      warn: report.checks.filter((each) => each.status === 'warn').length,
      fail: 0,
    });
    for (const each of report.checks) {
      assert.deepEqual(Object.keys(each).sort(), ['check', 'detail', 'duration_ms', 'environment', 'fix', 'lasting', 'status']);
      assert.ok(['ok', 'warn', 'fail'].includes(each.status));
      assert.ok([null, 'sandbox', 'live'].includes(each.environment));
      assert.equal(typeof each.detail, 'string');
      assert.equal(each.fix === null, each.status === 'ok', 'what to do, exactly when not ok');
      assert.ok(Number.isInteger(each.duration_ms));
    }
    assert.match(check('postgresql').detail, /every migration applied/);
    assert.equal(check('temporal').status, 'ok');
    assert.equal(check('key custody data key').status, 'ok');
    assert.match(check('key custody stored rows').detail, /sealed rows open under the configured keys/);
    assert.equal(check('ethereum live node').detail, 'reachable, chain id 1, token contracts as the catalogue has them');
    assert.match(check('stripe issuing key').detail, /^test-mode key; Stripe answers in test mode; reads the balance and Issuing authorizations$/);
    assert.equal(check('stripe issuing webhook secrets').status, 'ok');
    assert.equal(check('price node (ethereum)').status, 'ok');
    assert.match(check('price ETH').detail, /^3000 USD, updated \d+ s ago \(heartbeat 3600 s \+ margin 600 s\)$/);
  });

  it('fails a node on another network and a stale feed: one line each, what to do under it, exit 1', async () => {
    const other = await startAnvil();
    try {
      // The human report, with the same generous wait as doctorJson: on a busy machine a working part must not time out.
      const { code, stdout } = await doctor(['--timeout-ms', '30000'], { ...base, CHAIN_NODE_ETHEREUM_LIVE: other.url, PRICE_NODE_LIVE: mainnet.url, PRICE_FEEDS_LIVE: `ETH=${ethFeed}:3600,BTC=${btcFeed}:3600` });
      assert.equal(code, 1);
      const lines = stdout.trimEnd().split('\n');
      for (const line of lines.slice(0, -1)) assert.match(line, /^((ok  |warn|fail)  [a-z][^:]*: \S|      to do: \S)/);
      assert.match(lines.at(-1)!, /^\d+ ok, \d+ warn, [1-9]\d* fail$/);
      const at = lines.indexOf('fail  ethereum live node: on the wrong network: expected Ethereum mainnet (chain id 1), the node serves 31337');
      assert.ok(at >= 0, stdout);
      assert.match(lines[at + 1]!, /^      to do: point CHAIN_NODE_ETHEREUM_LIVE at a node of the right network/);
      assert.match(stdout, /^fail  price BTC: stale: the round is older than its heartbeat plus PRICE_HEARTBEAT_MARGIN_SECONDS: 65000 USD, updated \d+ s ago \(heartbeat 3600 s \+ margin 600 s\); USD rules on BTC fail closed$/m);
      assert.match(stdout, /^ok    price ETH: 3000 USD/m);
    } finally {
      await other.stop();
    }
  });

  it('fails prices while an L2 sequencer is down', async () => {
    const arbitrum = await startAnvil({ chainId: 42161 });
    try {
      const feed = await deployAnvilPriceFeed(arbitrum);
      await setAnvilPriceRound(arbitrum, feed, feedUsd(3000), nowSeconds());
      const uptime = await deployAnvilSequencerUptimeFeed(arbitrum);
      await reportAnvilSequencerStatus(arbitrum, uptime, true, nowSeconds());
      const { code, check } = await doctorJson({ ...base, PRICE_NETWORK_LIVE: 'arbitrum', PRICE_NODE_LIVE: arbitrum.url, PRICE_SEQUENCER_UPTIME_FEED_LIVE: uptime, PRICE_FEEDS_LIVE: `ETH=${feed}:3600` });
      assert.equal(code, 1);
      assert.equal(check('price node (arbitrum)').status, 'ok');
      assert.deepEqual([check('price sequencer uptime feed').status, check('price sequencer uptime feed').detail], ['fail', 'the L2 sequencer is down: live keys have no prices']);
      assert.equal(check('price ETH').status, 'warn');
    } finally {
      await arbitrum.stop();
    }
  });

  it('fails a node that never answers within its timeout, and never prints its URL\'s secrets', async () => {
    const silent = await silentServer();
    try {
      const { code, check } = await doctorJson({ ...base, CHAIN_NODE_BITCOIN_LIVE: `http://rpcuser:rpcpass-kept-secret@127.0.0.1:${silent.port}/wallet/wallet-kept-secret` }, ['--timeout-ms', '1000']);
      assert.equal(code, 1);
      const bitcoin = check('bitcoin live node');
      assert.equal(bitcoin.status, 'fail');
      assert.equal(bitcoin.lasting, false, 'a node down may come back');
      assert.match(bitcoin.detail, /no answer within 1000 ms|unreachable/);
      // Cut off by its 1,000 ms, not by a call of its own that never ends (a bound, loose for a busy machine).
      assert.ok(bitcoin.duration_ms < 10_000, `failed in ${bitcoin.duration_ms} ms`);
      assert.ok(!printed.at(-2)!.includes('kept-secret'));
    } finally {
      await silent.close();
    }
  });

  it('fails a Stripe key of the other mode and webhook secrets that are not Stripe\'s or one for both', async function () {
    const mock = needStripeMock(this, stripe);
    const otherMode = await doctorJson({ ...base, ...mock.config, STRIPE_ISSUING_MODE: 'live', STRIPE_ISSUING_WEBHOOK_SECRET: 'not-a-secret' });
    assert.equal(otherMode.code, 1);
    assert.deepEqual(otherMode.check('stripe issuing key'), {
      ...otherMode.check('stripe issuing key'),
      status: 'fail',
      lasting: true,
      detail: 'STRIPE_ISSUING_SECRET_KEY is not a live-mode key (sk_live_ or rk_live_) as STRIPE_ISSUING_MODE=live requires',
    });
    assert.match(otherMode.check('stripe issuing webhook secrets').detail, /^STRIPE_ISSUING_WEBHOOK_SECRET is not a Stripe signing secret \(12 characters, no whsec_ prefix\)/);
    const oneForBoth = await doctorJson({ ...base, ...mock.config, STRIPE_ISSUING_WEBHOOK_SECRET: mock.authorizationSecret });
    assert.equal(oneForBoth.check('stripe issuing key').status, 'ok');
    assert.match(oneForBoth.check('stripe issuing webhook secrets').detail, /the same secret/);
    const missing = await doctorJson({ ...base, ...mock.config, STRIPE_ISSUING_AUTHORIZATION_SECRET: undefined });
    assert.match(missing.check('stripe issuing webhook secrets').detail, /^STRIPE_ISSUING_AUTHORIZATION_SECRET not set/);
  });

  it('at start: logs every check; in production a lasting failure of a live provider stops the start, a node down does not', async () => {
    const other = await startAnvil();
    const { orm } = database;
    const closed = await silentServer();
    await closed.close();
    try {
      const lines: Record<string, unknown>[] = [];
      const log = createLogger('info', 'api', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
      const wrongNetwork = { ...base, CHAIN_NODE_ETHEREUM_LIVE: other.url };
      // Outside production the start goes on at once; the checks are logged as they end.
      await startupSelfTest(testConfig(wrongNetwork), log, orm);
      const logged = async () => {
        for (let waited = 0; waited < 20_000 && !lines.some((line) => line.check === 'ethereum live node'); waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
        return lines.find((line) => line.check === 'ethereum live node');
      };
      assert.deepEqual(await logged().then((line) => [line?.level, line?.status]), [50, 'fail']);
      assert.ok(lines.some((line) => line.check === 'postgresql' && line.status === 'ok' && line.level === 30));

      const production = (overrides: Record<string, string>) => testConfig({ ...base, ...overrides, NODE_ENV: 'production', SEED_MASTER_KEY: TEST_MASTER_KEY });
      await assert.rejects(startupSelfTest(production(wrongNetwork), log, orm), (error: Error) => error instanceof ConfigError && /ethereum live node: on the wrong network/.test(error.message));
      // Unreachable is not lasting: the start goes on, the provider answers 503 until the node is back.
      await startupSelfTest(production({ CHAIN_NODE_BITCOIN_LIVE: `http://127.0.0.1:${closed.port}` }), log, orm);
    } finally {
      await other.stop();
    }
  });

  describe('LND', () => {
    let lone: { lnd: Lnd; stop: () => Promise<void> } | { missing: string };
    let lnd: Lnd;
    let macaroons: string[] = [];

    before(async function () {
      lone = await startLoneLnd();
      if ('missing' in lone) missingTool(this, `LND not available: ${lone.missing}`);
      lnd = lone.lnd;
      macaroons = [lnd.macaroonPath, lnd.serviceMacaroonPath].map((file) => readFileSync(file).toString('hex'));
    });
    after(async () => {
      if (lone && !('missing' in lone)) await lone.stop();
      const all = printed.join('\n');
      for (const macaroon of macaroons) assert.ok(!all.includes(macaroon), 'a macaroon was printed');
    });

    const lndEnv = (environment: 'LIVE' | 'SANDBOX', macaroonPath: string, network: string) => ({
      [`LIGHTNING_LND_${environment}_REST_URL`]: lnd.restUrl,
      [`LIGHTNING_LND_${environment}_MACAROON_PATH`]: macaroonPath,
      [`LIGHTNING_LND_${environment}_TLS_CERT_PATH`]: lnd.tlsCertPath,
      [`LIGHTNING_LND_${environment}_NETWORK`]: network,
    });

    it('passes a baked macaroon on the right network; fails a node on another network', async () => {
      const { check } = await doctorJson({ ...base, ...lndEnv('LIVE', lnd.serviceMacaroonPath, 'regtest'), ...lndEnv('SANDBOX', lnd.macaroonPath, 'testnet') });
      assert.deepEqual([check('lnd live node').status, check('lnd live node').detail], ['ok', `reachable, on regtest, identity ${lnd.pubkey}`]);
      assert.deepEqual([check('lnd live macaroon').status, check('lnd live macaroon').detail], ['ok', 'grants exactly info:read, invoices:read, invoices:write, offchain:read, offchain:write']);
      const sandbox = check('lnd sandbox node');
      assert.deepEqual([sandbox.status, sandbox.lasting], ['fail', true]);
      assert.match(sandbox.detail, /runs on regtest; this environment pays testnet invoices/);
      // Sandbox does not refuse a broad macaroon: a warning.
      assert.equal(check('lnd sandbox macaroon').status, 'warn');
    });

    it('fails the admin macaroon for live: broader than what the service uses', async () => {
      const { code, check } = await doctorJson({ ...base, ...lndEnv('LIVE', lnd.macaroonPath, 'regtest') });
      assert.equal(code, 1);
      const macaroon = check('lnd live macaroon');
      assert.deepEqual([macaroon.status, macaroon.lasting], ['fail', true]);
      assert.match(macaroon.detail, /^grants .*macaroon:generate.* beyond what the service uses \(info:read, invoices:read, invoices:write, offchain:read, offchain:write\); live refuses it/);
      assert.match(macaroon.fix!, /npm run cli -- lnd:bake-macaroon/);
    });
  });
});
