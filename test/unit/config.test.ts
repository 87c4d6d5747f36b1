import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config';

describe('Configuration', () => {
  it('applies defaults and coerces numbers', () => {
    const config = loadConfig({ DATABASE_URL: 'postgresql://localhost/db', PORT: '8080' });
    assert.equal(config.PORT, 8080);
    assert.equal(config.TEMPORAL_NAMESPACE, 'default');
    assert.equal(config.RATE_LIMIT_BURST, 100);
    assert.equal(config.CHAIN_CHECK_SECONDS, 5);
    assert.throws(() => loadConfig({ DATABASE_URL: 'postgresql://localhost/db', CHAIN_CHECK_SECONDS: '0' }), /CHAIN_CHECK_SECONDS:/);
  });

  it('trusts no proxy and allows no loopback webhook target unless told to, as `npm start` runs (no NODE_ENV)', () => {
    const defaults = loadConfig({ DATABASE_URL: 'postgresql://localhost/db' });
    assert.equal(defaults.TRUST_PROXY, 0);
    assert.equal(defaults.WEBHOOK_ALLOW_INSECURE_LOOPBACK, false);
    const set = loadConfig({ DATABASE_URL: 'postgresql://localhost/db', TRUST_PROXY: '2', WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true' });
    assert.deepEqual([set.TRUST_PROXY, set.WEBHOOK_ALLOW_INSECURE_LOOPBACK], [2, true]);
    assert.throws(() => loadConfig({ DATABASE_URL: 'postgresql://localhost/db', TRUST_PROXY: 'yes' }), /TRUST_PROXY:/);
  });

  it("bounds the main worker's slots and cache by default and takes WORKER_* overrides", () => {
    const defaults = loadConfig({ DATABASE_URL: 'postgresql://localhost/db' });
    assert.deepEqual(
      [defaults.WORKER_MAX_ACTIVITIES, defaults.WORKER_MAX_WORKFLOW_TASKS, defaults.WORKER_CACHED_WORKFLOWS],
      [50, 20, 500],
    );
    const set = loadConfig({ DATABASE_URL: 'postgresql://localhost/db', WORKER_MAX_ACTIVITIES: '8', WORKER_MAX_WORKFLOW_TASKS: '4', WORKER_CACHED_WORKFLOWS: '0' });
    assert.deepEqual([set.WORKER_MAX_ACTIVITIES, set.WORKER_MAX_WORKFLOW_TASKS, set.WORKER_CACHED_WORKFLOWS], [8, 4, 0]);
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'postgresql://localhost/db', WORKER_MAX_ACTIVITIES: '0', WORKER_MAX_WORKFLOW_TASKS: '1', WORKER_CACHED_WORKFLOWS: 'many' }),
      (error: unknown) =>
        error instanceof ConfigError && /WORKER_MAX_ACTIVITIES:/.test(error.message) && /WORKER_MAX_WORKFLOW_TASKS:/.test(error.message) && /WORKER_CACHED_WORKFLOWS:/.test(error.message),
    );
  });

  it('reads the Solana mints as ASSET_ID=<base58 mint>, live defaulting to mainnet USDC, and refuses anything else', () => {
    const defaults = loadConfig({ DATABASE_URL: 'postgresql://localhost/db' });
    assert.deepEqual(defaults.CHAIN_TOKENS_SOLANA_LIVE, { USDC_SOL: 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v' });
    assert.equal(defaults.CHAIN_TOKENS_SOLANA_SANDBOX, undefined);
    const set = loadConfig({ DATABASE_URL: 'postgresql://localhost/db', CHAIN_TOKENS_SOLANA_SANDBOX: 'USDC_SOL=4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU' });
    assert.deepEqual(set.CHAIN_TOKENS_SOLANA_SANDBOX, { USDC_SOL: '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU' });
    // 0, O, I and l are no base58 digits; an Ethereum contract is no mint.
    for (const mints of ['USDC_SOL=0PjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v', 'USDC_SOL=0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v']) {
      assert.throws(() => loadConfig({ DATABASE_URL: 'postgresql://localhost/db', CHAIN_TOKENS_SOLANA_LIVE: mints }), /CHAIN_TOKENS_SOLANA_LIVE:/, mints);
    }
    assert.throws(() => loadConfig({ DATABASE_URL: 'postgresql://localhost/db', CHAIN_NODE_SOLANA_LIVE: 'ws://127.0.0.1:8900' }), /CHAIN_NODE_SOLANA_LIVE:/);
  });

  it("takes an environment's LND as URL, macaroon and certificate together, over https only", () => {
    const db = { DATABASE_URL: 'postgresql://localhost/db' };
    const live = { LIGHTNING_LND_LIVE_REST_URL: 'https://127.0.0.1:8080', LIGHTNING_LND_LIVE_MACAROON_PATH: '/lnd/admin.macaroon', LIGHTNING_LND_LIVE_TLS_CERT_PATH: '/lnd/tls.cert' };
    assert.equal(loadConfig({ ...db, ...live }).LIGHTNING_LND_LIVE_REST_URL, 'https://127.0.0.1:8080');
    assert.equal(loadConfig(db).LIGHTNING_LND_SANDBOX_NETWORK, 'testnet');
    assert.throws(() => loadConfig({ ...db, ...live, LIGHTNING_LND_LIVE_TLS_CERT_PATH: undefined }), /LIGHTNING_LND_LIVE_TLS_CERT_PATH: .*go together/);
    assert.throws(() => loadConfig({ ...db, LIGHTNING_LND_SANDBOX_MACAROON_PATH: '/lnd/admin.macaroon' }), /LIGHTNING_LND_SANDBOX_REST_URL: .*go together/);
    assert.throws(() => loadConfig({ ...db, ...live, LIGHTNING_LND_LIVE_REST_URL: 'http://127.0.0.1:8080' }), /LIGHTNING_LND_LIVE_REST_URL: must be an https:\/\/ URL/);
  });

  it('names every bad variable in one error', () => {
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'mysql://x', PORT: 'eighty', LOG_LEVEL: 'loud' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /DATABASE_URL: DATABASE_URL must be a postgresql:\/\/ URL/.test(error.message) &&
        /PORT:/.test(error.message) &&
        /LOG_LEVEL:/.test(error.message),
    );
  });
});
