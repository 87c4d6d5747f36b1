import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { ed25519 } from '@noble/curves/ed25519';
import { base58 } from '@scure/base';
import { recoverAddress, keccak256, toHex } from 'viem';
import { Address, Wallet } from '../../src/custody/entities';
import { keyLocation } from '../../src/custody/service';
import { hardenedPath } from '../../src/keys/derivation';
import { OrganizationSeed, SeedPublicKey } from '../../src/keys/entities';
import { isValidMnemonicBytes } from '../../src/keys/mnemonic';
import { KeyService, keyServiceFor, seedContexts } from '../../src/keys/service';
import type { ServiceWorkers } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { createTestWorker } from '../support/worker';

const dataKey = randomBytes(32).toString('base64');
const seedKey = randomBytes(32).toString('base64');
/** The worker as in production: the data key and the seed key. */
const SIGNER = { NODE_ENV: 'production', MASTER_KEY: dataKey, SEED_MASTER_KEY: seedKey };
/** The API as in production: the data key only (production never falls back to it for seeds). */
const API = { NODE_ENV: 'production', MASTER_KEY: dataKey, SEED_MASTER_KEY: undefined };
/** An API started without any key provider (sandbox; outside production, told not to fall back): neither a master key nor a seed key. */
const KEYLESS_API = { MASTER_KEY: undefined, SEED_MASTER_KEY: undefined, SEED_KEY_FALLBACK: 'none' };

const CHAINS = ['bitcoin', 'ethereum', 'tron', 'solana'] as const;

describe('Key custody: the API process cannot reach a seed', () => {
  let worker: ServiceWorkers;
  let running: Promise<void>;
  let taskQueue: string;
  /** The seed as the signer holds it, to check what the API derived without it. */
  let signerKeys: KeyService;

  before(async () => {
    ({ worker, taskQueue } = await createTestWorker(await localTemporal(), undefined, SIGNER));
    running = worker.run();
    const signerConfig = testConfig(SIGNER);
    signerKeys = keyServiceFor(signerConfig);
  });
  after(async () => {
    worker?.shutdown();
    await running;
  });

  /** Every address of `walletId` equals what the seed itself derives at its path (the signer's view). */
  async function assertAddressesOfSeed(organizationId: string, walletId: string) {
    const em = (await testOrm()).em.fork();
    const wallet = await em.findOneOrFail(Wallet, walletId);
    const addresses = await em.find(Address, { wallet }, { orderBy: { addressIndex: 'asc' } });
    const locations = addresses.map((address) => keyLocation(wallet, address.format, address.addressIndex));
    const derived = await signerKeys.withKeys(em, organizationId, wallet.environment, locations, (keys) => keys.map((key) => ({ address: key.address, path: key.path })));
    assert.deepEqual(
      addresses.map((address) => ({ address: address.address, path: address.derivationPath })),
      derived,
    );
    return addresses;
  }

  describe('an API configured as in production, with a signing worker', () => {
    let app: TestApp;
    let org: TestOrganization;
    let vaultId: string;
    const wallets: Record<string, { id: string; primary_address: { address: string } }> = {};

    before(async () => {
      app = await startTestApp({ config: { ...API, TEMPORAL_TASK_QUEUE: taskQueue } });
      org = await createTestOrganization('Signer split');
      vaultId = (await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Treasury' } })).body.id;
    });
    after(() => app?.close());

    it('holds no seed key: its KeyService refuses seeds, and its providers cannot open the seed row', async () => {
      assert.equal(app.deps.keys.signer, false);
      const em = (await testOrm()).em.fork();
      await assert.rejects(app.deps.keys.ensureSeed(em, org.organizationId, 'sandbox'), (error: Error & { code?: string }) => error.code === 'seed_key_unavailable');
      const location = { chain: 'ethereum', testnet: true, coinType: 1, format: 'eip55', account: 0, index: 0 } as const;
      await assert.rejects(
        app.deps.keys.withKeys(em, org.organizationId, 'sandbox', [location], () => 'never'),
        /holds no seed key: seeds are opened only by signers/,
      );
    });

    it('creates wallets on all four chains and further addresses, each equal to what the seed derives', async () => {
      for (const chain of CHAINS) {
        const created = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: `${chain} wallet`, chain, vault_id: vaultId } });
        assert.equal(created.status, 201, created.text);
        wallets[chain] = created.body;
      }
      for (const [chain, body] of [
        ['bitcoin', { address_format: 'p2tr' }],
        ['bitcoin', { address_format: 'p2pkh' }],
        ['bitcoin', {}],
        ['ethereum', {}],
        ['tron', {}],
        ['solana', {}],
        ['solana', {}],
      ] as const) {
        const address = await app.request('POST', `/v1/wallets/${wallets[chain]!.id}/addresses`, { key: org.secret, body });
        assert.equal(address.status, 201, address.text);
      }
      for (const chain of CHAINS) {
        const addresses = await assertAddressesOfSeed(org.organizationId, wallets[chain]!.id);
        assert.equal(addresses.length, chain === 'bitcoin' ? 4 : chain === 'solana' ? 3 : 2);
      }
      // The seed was made by the signer, under the seed key; the API stored no private material.
      const em = (await testOrm()).em.fork();
      const seed = await em.findOneOrFail(OrganizationSeed, { organization: org.organizationId, environment: 'sandbox' });
      assert.equal(seed.masterKeyId, signerKeys.seedProvider!.masterKeyId);
      assert.notEqual(seed.masterKeyId, app.deps.keys.provider.masterKeyId);
      // A row per hardened node (and the next accounts', stored ahead): secp256k1 accounts' xpubs, Solana addresses' public keys. Public material only.
      const stored = await em.find(SeedPublicKey, { seed });
      const addresses = await em.find(Address, { wallet: { $in: Object.values(wallets).map((wallet) => wallet.id) } }, { populate: ['wallet'] });
      const nodes = new Set(addresses.map((address) => hardenedPath(keyLocation(address.wallet, address.format, address.addressIndex))));
      const paths = new Set(stored.map((row) => row.path));
      for (const node of nodes) assert.ok(paths.has(node), `${node} is stored`);
      for (const row of stored) assert.match(row.publicKey, row.path.split('/').length === 5 ? /^[0-9a-f]{64}$/ : /^xpub/);
    });

    it('still cannot open the seed row with its own providers: the row names the seed key', async () => {
      const em = (await testOrm()).em.fork();
      const seed = await em.findOneOrFail(OrganizationSeed, { organization: org.organizationId, environment: 'sandbox' });
      const contexts = seedContexts({ envelopeVersion: seed.envelopeVersion, organizationId: org.organizationId, environment: seed.environment });
      const sealed = { keyProvider: seed.keyProvider, masterKeyId: seed.masterKeyId, wrappedDataKey: seed.wrappedDataKey, ciphertext: seed.mnemonicCiphertext };
      await assert.rejects(new KeyService(app.deps.keys.provider).open(sealed, contexts.dataKey, contexts.mnemonic), new RegExp(`wrapped under ${seed.masterKeyId}`));
      // The signer's opens it.
      const mnemonic = await new KeyService(signerKeys.seedProvider!).open(sealed, contexts.dataKey, contexts.mnemonic);
      assert.ok(isValidMnemonicBytes(mnemonic));
      mnemonic.fill(0);
    });

    it('signs payloads through the worker and records the activity', async () => {
      const ethereum = wallets.ethereum!;
      const signed = await app.request('POST', `/v1/wallets/${ethereum.id}/sign`, { key: org.secret, body: { payload: 'hello signer', payload_encoding: 'text_utf8' } });
      assert.equal(signed.status, 200, signed.text);
      const digest = keccak256(toHex('hello signer'));
      assert.equal(await recoverAddress({ hash: digest, signature: `0x${signed.body.signature}` }), ethereum.primary_address.address);

      const solana = wallets.solana!;
      const message = Buffer.from('a solana message').toString('hex');
      const ed = await app.request('POST', `/v1/wallets/${solana.id}/sign`, { key: org.secret, body: { payload: message, payload_encoding: 'hexadecimal' } });
      assert.equal(ed.status, 200, ed.text);
      assert.ok(ed25519.verify(ed.body.signature, message, base58.decode(solana.primary_address.address)));

      const em = (await testOrm()).em.fork();
      assert.equal(await em.count('SigningActivity', { id: { $in: [signed.body.activity_id, ed.body.activity_id] } }), 2);
    });

    it('creates wallets made together on distinct accounts, each asking the signer for what it lacks', async () => {
      const made = await Promise.all(
        Array.from({ length: 8 }, (_, index) => app.request('POST', '/v1/wallets', { key: org.secret, body: { name: `together ${index}`, chain: 'tron', vault_id: vaultId } })),
      );
      for (const response of made) assert.equal(response.status, 201, response.text);
      const em = (await testOrm()).em.fork();
      const accounts = (await em.find(Wallet, { id: { $in: made.map((response) => response.body.id) } })).map((wallet) => wallet.accountIndex);
      assert.equal(new Set(accounts).size, 8);
      for (const response of made) await assertAddressesOfSeed(org.organizationId, response.body.id);
    });

    it('creates gas stations, whose wallets derive like any other', async () => {
      const station = await app.request('POST', '/v1/gas-stations', { key: org.secret, body: { name: 'Gas', chain: 'solana', threshold: '1' } });
      assert.equal(station.status, 201, station.text);
      await assertAddressesOfSeed(org.organizationId, station.body.wallet_id);
    });

    it('serves reads', async () => {
      for (const path of ['/v1/vaults', `/v1/vaults/${vaultId}`, '/v1/wallets', `/v1/wallets/${wallets.bitcoin!.id}`, `/v1/wallets/${wallets.bitcoin!.id}/addresses`, `/v1/wallets/${wallets.tron!.id}/balances`]) {
        const response = await app.request('GET', path, { key: org.secret });
        assert.equal(response.status, 200, `${path}: ${response.text}`);
      }
    });

    it('creates live wallets too: the data key is no development key, and the signer holds a strong seed key', async () => {
      const live = (await org.key(['*'], 'live')).secret;
      const vault = await app.request('POST', '/v1/vaults', { key: live, body: { name: 'Live treasury' } });
      assert.equal(vault.status, 201, vault.text);
      const wallet = await app.request('POST', '/v1/wallets', { key: live, body: { name: 'live eth', chain: 'ethereum', vault_id: vault.body.id } });
      assert.equal(wallet.status, 201, wallet.text);
      await assertAddressesOfSeed(org.organizationId, wallet.body.id);
    });

    it('derives the first address of a wallet made before public keys were stored through the signer (lazy backfill)', async () => {
      const em = (await testOrm()).em.fork();
      const wallet = await em.findOneOrFail(Wallet, wallets.tron!.id);
      // As a wallet made before this change: its account's public key was never stored.
      const account = hardenedPath(keyLocation(wallet, 'base58check', 0));
      const seed = await em.findOneOrFail(OrganizationSeed, { organization: org.organizationId, environment: 'sandbox' });
      assert.equal(await em.nativeDelete(SeedPublicKey, { seed, path: account }), 1);
      const address = await app.request('POST', `/v1/wallets/${wallet.id}/addresses`, { key: org.secret, body: {} });
      assert.equal(address.status, 201, address.text);
      await assertAddressesOfSeed(org.organizationId, wallet.id);
    });
  });

  it('answers 503 worker_unavailable when no signer answers in time, and a retry with the same Idempotency-Key converges', async () => {
    const queue = `no-worker-yet-${randomUUID()}`;
    const app = await startTestApp({ config: { ...API, TEMPORAL_TASK_QUEUE: queue, WORKFLOW_UPDATE_TIMEOUT_SECONDS: '2' } });
    let late: { worker: ServiceWorkers } | undefined;
    let lateRunning: Promise<void> | undefined;
    try {
      const org = await createTestOrganization('Signer late');
      const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'v' } });
      const request = { key: org.secret, body: { name: 'first', chain: 'ethereum', vault_id: vault.body.id }, headers: { 'Idempotency-Key': 'wallet-first' } };
      const refused = await app.request('POST', '/v1/wallets', request);
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.body.error.code, 'worker_unavailable');

      late = await createTestWorker(await localTemporal(), queue, SIGNER);
      lateRunning = late.worker.run();
      const created = await app.request('POST', '/v1/wallets', request);
      assert.equal(created.status, 201, created.text);
      const again = await app.request('POST', '/v1/wallets', request);
      assert.equal(again.body.id, created.body.id);
      const listed = await app.request('GET', '/v1/wallets', { key: org.secret });
      assert.equal(listed.body.data.length, 1);
      await assertAddressesOfSeed(org.organizationId, created.body.id);

      // The worker gone while a signature is asked: 503, and once a worker is back the signature it makes is recorded with it.
      late.worker.shutdown();
      await lateRunning;
      const unanswered = await app.request('POST', `/v1/wallets/${created.body.id}/sign`, { key: org.secret, body: { payload: 'asked while no signer runs', payload_encoding: 'text_utf8' } });
      assert.equal(unanswered.status, 503, unanswered.text);
      late = await createTestWorker(await localTemporal(), queue, SIGNER);
      lateRunning = late.worker.run();
      const em = (await testOrm()).em.fork();
      await eventually(async () => ((await em.fork().count('SigningActivity', { wallet: created.body.id })) === 1 ? true : undefined), 'the late signature recorded');
    } finally {
      await app.close();
      late?.worker.shutdown();
      await lateRunning;
    }
  });

  describe('an API started without any key provider (sandbox)', () => {
    let app: TestApp;
    let org: TestOrganization;

    before(async () => {
      app = await startTestApp({ config: { ...KEYLESS_API, TEMPORAL_TASK_QUEUE: taskQueue } });
      org = await createTestOrganization('Keyless API');
    });
    after(() => app?.close());

    it('creates wallets and addresses on every chain, and serves every read', async () => {
      assert.equal(app.deps.keys.signer, false);
      const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'v' } });
      assert.equal(vault.status, 201, vault.text);
      for (const chain of CHAINS) {
        const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: chain, chain, vault_id: vault.body.id } });
        assert.equal(wallet.status, 201, wallet.text);
        const address = await app.request('POST', `/v1/wallets/${wallet.body.id}/addresses`, { key: org.secret, body: {} });
        assert.equal(address.status, 201, address.text);
        await assertAddressesOfSeed(org.organizationId, wallet.body.id);
        for (const path of [`/v1/wallets/${wallet.body.id}`, `/v1/wallets/${wallet.body.id}/addresses`, `/v1/wallets/${wallet.body.id}/balances`, `/v1/addresses/${address.body.id}`]) {
          const read = await app.request('GET', path, { key: org.secret });
          assert.equal(read.status, 200, `${path}: ${read.text}`);
        }
      }
      for (const path of ['/v1/vaults', '/v1/wallets', '/v1/balances', '/v1/transactions', '/v1/policies', '/v1/deposits', '/v1/gas-stations', '/v1/address-book', '/v1/events', '/v1/chains']) {
        const read = await app.request('GET', path, { key: org.secret });
        assert.equal(read.status, 200, `${path}: ${read.text}`);
      }
    });
  });
});
