import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { mnemonicToSeedSync } from '@scure/bip39';
import { CHAIN_IDS, type ChainId } from '../../src/catalogue/service';
import { fundFromFaucet } from '../../src/chains/devnet/faucet';
import { mineDevnetBlocks } from '../../src/chains/devnet/block-production';
import { faucetAddress } from '../../src/chains/devnet/ledger';
import { devnetBalance } from '../../src/chains/devnet/ledger-reads';
import { DEVNET_PARAMS } from '../../src/chains/devnet/params';
import { addressFormatFor, deriveKey, TESTNET_COIN_TYPE } from '../../src/keys/derivation';
import { SandboxDeposit } from '../../src/monitoring/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { testOrm } from '../support/environment';

/** An address nobody on the platform holds: a fresh account of a public test mnemonic. */
const SEED = mnemonicToSeedSync('abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about');
const outsideAddress = (chain: ChainId) =>
  deriveKey(SEED, { chain, testnet: true, coinType: TESTNET_COIN_TYPE, format: addressFormatFor(chain), account: randomInt(1, 2 ** 30), index: 0 }).address;

describe('Sandbox deposits: capped per request and per organization per day, from a faucet that is replenished', () => {
  let app: TestApp;
  const config = { SANDBOX_DEPOSIT_MAX_PER_REQUEST: 'ETH=1', SANDBOX_DEPOSIT_MAX_PER_DAY: 'ETH=2.5' };

  before(async () => {
    app = await startTestApp({ config });
  });
  after(() => app?.close());

  async function walletOf(org: TestOrganization, chain: ChainId) {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: chain } });
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: chain, chain, vault_id: vault.body.id } });
    assert.equal(wallet.status, 201, wallet.text);
    return wallet.body.primary_address.address as string;
  }
  const deposit = (org: TestOrganization, body: Record<string, unknown>) => app.request('POST', '/v1/sandbox/deposits', { key: org.secret, body });

  it('refuses an amount above the per-request maximum with 400 amount_too_large, the configured one and the defaults, sending nothing', async () => {
    const org = await createTestOrganization('Deposit cap per request');
    const address = await walletOf(org, 'ethereum');
    const tooMuch = await deposit(org, { chain: 'ethereum', address, asset: 'ETH', amount: '1.000000000000000001' });
    assert.equal(tooMuch.status, 400, tooMuch.text);
    assert.equal(tooMuch.body.error.code, 'amount_too_large');
    assert.equal(tooMuch.body.error.param, 'amount');
    assert.deepEqual(tooMuch.body.error.details, { asset_id: 'ETH', max_per_request: '1' });
    // The assets the configuration does not name keep their defaults (docs/devnet.md).
    const bitcoin = await deposit(org, { chain: 'bitcoin', address: await walletOf(org, 'bitcoin'), asset: 'BTC', amount: '10.00000001' });
    assert.equal(bitcoin.status, 400, bitcoin.text);
    assert.deepEqual(bitcoin.body.error.details, { asset_id: 'BTC', max_per_request: '10' });
    const usdc = await deposit(org, { chain: 'ethereum', address, asset: 'USDC', amount: '1000000.000001' });
    assert.equal(usdc.body.error.code, 'amount_too_large');
    assert.equal((await app.request('GET', '/v1/deposits', { key: org.secret })).body.data.length, 0, 'nothing was sent');

    const exactly = await deposit(org, { chain: 'ethereum', address, asset: 'ETH', amount: '1' });
    assert.equal(exactly.status, 201, exactly.text);
  });

  it("caps an organization's deposits of an asset in any 24 hours, to any address, with 429 sandbox_deposit_limit saying what remains; another organization is unaffected", async () => {
    const [org, other] = await Promise.all([createTestOrganization('Deposit cap per day'), createTestOrganization('Another organization')]);
    const own = await walletOf(org, 'ethereum');
    for (const address of [own, outsideAddress('ethereum')]) {
      const made = await deposit(org, { chain: 'ethereum', address, asset: 'ETH', amount: '1' });
      assert.equal(made.status, 201, made.text);
    }
    const started = Date.now();
    const refused = await deposit(org, { chain: 'ethereum', address: own, asset: 'ETH', amount: '0.6' });
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.body.error.code, 'sandbox_deposit_limit');
    assert.equal(refused.body.error.type, 'rate_limit_error');
    const { available_at: availableAt, retry_after_seconds: retryAfter, ...details } = refused.body.error.details;
    assert.deepEqual(details, { asset_id: 'ETH', max_per_day: '2.5', used: '2', remaining: '0.5' });
    // 0.6 fits once the first deposit (1 ETH) is 24 hours old.
    const first = await (await testOrm()).em.fork().findOneOrFail(SandboxDeposit, { organization: org.organizationId, assetId: 'ETH' }, { orderBy: { createdAt: 'asc' } });
    assert.equal(availableAt, new Date(first.createdAt.getTime() + 24 * 3600 * 1000).toISOString());
    assert.equal(refused.headers.get('retry-after'), String(retryAfter));
    assert.ok(retryAfter > 23 * 3600 && retryAfter <= Math.ceil((first.createdAt.getTime() + 24 * 3600 * 1000 - started) / 1000));

    assert.equal((await deposit(org, { chain: 'ethereum', address: own, asset: 'ETH', amount: '0.5' })).status, 201, 'what remains can be taken');
    const exhausted = await deposit(org, { chain: 'ethereum', address: own, asset: 'ETH', amount: '0.000000000000000001' });
    assert.equal(exhausted.status, 429);
    assert.equal(exhausted.body.error.details.remaining, '0');
    // Another asset has its own allowance, and so has another organization.
    assert.equal((await deposit(org, { chain: 'ethereum', address: own, asset: 'USDC', amount: '10' })).status, 201);
    assert.equal((await deposit(other, { chain: 'ethereum', address: await walletOf(other, 'ethereum'), asset: 'ETH', amount: '1' })).status, 201);

    // The window rolls: deposits older than 24 hours no longer count.
    await (await testOrm()).em.fork().nativeUpdate(SandboxDeposit, { organization: org.organizationId }, { createdAt: new Date(Date.now() - 25 * 3600 * 1000) });
    assert.equal((await deposit(org, { chain: 'ethereum', address: own, asset: 'ETH', amount: '1' })).status, 201);
  });

  it("keeps paying after deposits totalling more than the faucet's initial funds, on every chain", async () => {
    const org = await createTestOrganization('After the faucet ran dry');
    const em = (await testOrm()).em.fork();
    for (const chain of CHAIN_IDS) {
      const { nativeAssetId, genesis } = DEVNET_PARAMS[chain];
      const sink = outsideAddress(chain);
      // Twice 60% of the genesis funds: more than the faucet ever started with.
      const drain = (genesis[nativeAssetId]! * 6n) / 10n;
      for (let step = 0; step < 2; step++) await fundFromFaucet(em, chain, { to: sink, assetId: nativeAssetId, amount: drain });
      await mineDevnetBlocks(em, chain, 1);
      assert.equal(await devnetBalance(em, chain, sink, nativeAssetId), 2n * drain, `${chain}: the faucet paid both`);
      assert.ok((await devnetBalance(em, chain, faucetAddress(chain), nativeAssetId)) >= genesis[nativeAssetId]! / 2n, `${chain}: the faucet was replenished`);

      const address = await walletOf(org, chain);
      const made = await deposit(org, { chain, address, asset: nativeAssetId, amount: '0.5' });
      assert.equal(made.status, 201, `${chain}: ${made.text}`);
      assert.equal(made.body.deposit.status, 'pending');
    }
  });
});
