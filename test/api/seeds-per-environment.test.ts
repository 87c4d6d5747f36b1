import assert from 'node:assert/strict';
import { bytesToHex } from '@noble/hashes/utils';
import { keccak256, recoverAddress } from 'viem';
import { Wallet } from '../../src/custody/entities';
import { SHARED_LIVE_SEEDS_SQL } from '../../src/db/migrations/Migration20261130002001';
import { OrganizationSeed } from '../../src/keys/entities';
import { generateMnemonicBytes } from '../../src/keys/mnemonic';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { cli } from '../support/cli';
import { testOrm } from '../support/environment';

/** The same place in both trees: Ethereum's coin type, account 0, first address. */
const ACCOUNT_ZERO = { chain: 'ethereum', testnet: false, coinType: 60, format: 'eip55', account: 0, index: 0 } as const;

describe('Keys: one seed per environment', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp();
  });
  after(() => app?.close());

  /** An organization with a sandbox and a live root key, and a vault in each environment. */
  async function organizationWithBothKeys(name: string) {
    const org = await createTestOrganization(name);
    const live = (await org.key(['*'], 'live')).secret;
    const vaults = {
      sandbox: (await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'sandbox' } })).body.id as string,
      live: (await app.request('POST', '/v1/vaults', { key: live, body: { name: 'live' } })).body.id as string,
    };
    const wallet = async (environment: 'sandbox' | 'live', chain = 'ethereum') => {
      const response = await app.request('POST', '/v1/wallets', { key: environment === 'live' ? live : org.secret, body: { name: `${environment} ${chain}`, chain, vault_id: vaults[environment] } });
      assert.equal(response.status, 201, response.text);
      return response.body;
    };
    return { org, keys: { sandbox: org.secret, live }, wallet };
  }

  /** Signs keccak256(payload) with the wallet's primary address through the API and recovers who signed. */
  async function signerOf(key: string, walletId: string, payload: string): Promise<string> {
    const signed = await app.request('POST', `/v1/wallets/${walletId}/sign`, { key, body: { payload, hash_function: 'keccak256' } });
    assert.equal(signed.status, 200, signed.text);
    return recoverAddress({ hash: keccak256(`0x${payload}`), signature: `0x${signed.body.signature}` });
  }

  const seedsOf = async (organizationId: string) =>
    (await testOrm()).em.fork().find(OrganizationSeed, { organization: organizationId }, { orderBy: { environment: 'asc' } });

  it('gives a new organization a sandbox and a live seed of different mnemonics, each sealed for its environment', async () => {
    const { org, keys, wallet } = await organizationWithBothKeys('Two seeds');
    const sandbox = await wallet('sandbox');
    const live = await wallet('live');
    const seeds = await seedsOf(org.organizationId);
    assert.deepEqual(
      seeds.map((seed) => [seed.environment, seed.envelopeVersion, seed.sharesSandboxMnemonic]),
      [['sandbox', 2, false], ['live', 2, false]],
    );
    assert.notEqual(seeds[0]!.mnemonicCiphertext, seeds[1]!.mnemonicCiphertext);

    // The same path in both trees gives different keys: different mnemonics, not just different coin types.
    const em = (await testOrm()).em.fork();
    const at = (environment: 'sandbox' | 'live') => app.deps.keys.withKeys(em, org.organizationId, environment, [ACCOUNT_ZERO], ([key]) => key!.address);
    assert.notEqual(await at('sandbox'), await at('live'));

    // Each wallet signs with its own environment's seed: the signature recovers to its own address.
    assert.equal(await signerOf(keys.sandbox, sandbox.id, 'cafe'), sandbox.primary_address.address);
    assert.equal(await signerOf(keys.live, live.id, 'cafe'), live.primary_address.address);
  });

  it('converges 20 concurrent first live wallets of an organization on one live seed', async () => {
    const { org, wallet } = await organizationWithBothKeys('Concurrent live');
    const wallets = await Promise.all(Array.from({ length: 20 }, () => wallet('live', 'tron')));
    assert.equal(new Set(wallets.map((each) => each.primary_address.address)).size, 20);
    const seeds = await seedsOf(org.organizationId);
    assert.deepEqual(seeds.map((seed) => seed.environment), ['live']);
    // Every wallet's address comes from that one seed.
    const em = (await testOrm()).em.fork();
    for (const created of wallets) {
      const row = await em.findOneOrFail(Wallet, { id: created.id });
      const location = { chain: 'tron', testnet: false, coinType: row.coinType, format: 'base58check', account: row.accountIndex, index: 0 } as const;
      assert.equal(await app.deps.keys.withKeys(em, org.organizationId, 'live', [location], ([key]) => key!.address), created.primary_address.address);
    }
  });

  describe('seeds made before the split (Migration20261130002001)', () => {
    /**
     * An organization as the migration finds it: one seed, sealed as before (envelope v1, its contexts naming the
     * organization only), from which both its sandbox and (with `liveWallet`) its live wallets derived.
     */
    async function legacyOrganization(name: string, liveWallet: boolean) {
      const setup = await organizationWithBothKeys(name);
      const { organizationId } = setup.org;
      const mnemonic = generateMnemonicBytes();
      const sealed = await app.deps.keys.seal(mnemonic, `custody-platform/seed-data-key/v1/${organizationId}`, `custody-platform/seed-mnemonic/v1/${organizationId}`);
      mnemonic.fill(0);
      const em = (await testOrm()).em.fork();
      const insert = (id: string, environment: string) =>
        em.execute(
          `insert into organization_seeds (id, organization_id, environment, shares_sandbox_mnemonic, envelope_version, key_provider, master_key_id, wrapped_data_key, mnemonic_ciphertext, created_at)
           values (?, ?, ?, false, 1, ?, ?, ?, ?, now())`,
          [id, organizationId, environment, sealed.keyProvider, sealed.masterKeyId, sealed.wrappedDataKey, sealed.ciphertext],
        );
      const seedId = `seed_legacy_${organizationId.slice(0, 8)}`;
      await insert(seedId, 'sandbox');
      const sandbox = await setup.wallet('sandbox');
      let live: Awaited<ReturnType<typeof setup.wallet>> | undefined;
      if (liveWallet) {
        // Before the split the one seed served live too.
        await insert(`${seedId}_before`, 'live');
        live = await setup.wallet('live');
        await em.execute(`delete from organization_seeds where id = ?`, [`${seedId}_before`]);
      }
      await em.execute(SHARED_LIVE_SEEDS_SQL);
      return { ...setup, seedId, sandbox, live };
    }

    it('keeps the live wallets of an organization signing with a live copy of its seed, and says what to do', async () => {
      const { org, keys, wallet, seedId, sandbox, live } = await legacyOrganization('Legacy with live wallets', true);
      const seeds = await seedsOf(org.organizationId);
      assert.deepEqual(
        seeds.map((seed) => [seed.id, seed.environment, seed.envelopeVersion, seed.sharesSandboxMnemonic]),
        [[seedId, 'sandbox', 1, false], [`${seedId}_live`, 'live', 1, true]],
      );
      // Its old addresses keep signing, in both environments, and new live wallets and addresses come from the same tree.
      assert.equal(await signerOf(keys.live, live!.id, 'beef'), live!.primary_address.address);
      assert.equal(await signerOf(keys.sandbox, sandbox.id, 'beef'), sandbox.primary_address.address);
      const next = await app.request('POST', `/v1/wallets/${live!.id}/addresses`, { key: keys.live, body: {} });
      assert.equal(next.status, 201, next.text);
      const another = await wallet('live');
      assert.equal(await signerOf(keys.live, another.id, 'beef'), another.primary_address.address);

      const listed = JSON.parse((await cli(['keys:seeds'])).stdout);
      const entry = listed.organizations.find((each: { organization_id: string }) => each.organization_id === org.organizationId);
      assert.deepEqual({ ...entry, what_to_do: undefined }, {
        organization_id: org.organizationId,
        name: 'Legacy with live wallets',
        sandbox_seed_id: seedId,
        live_seed_id: `${seedId}_live`,
        live_wallets: 2,
        what_to_do: undefined,
      });
      assert.match(entry.what_to_do, /Move their funds/);

      // Separating would orphan the live addresses: refused, exit status 1, nothing changed.
      const refused = await cli(['keys:separate-live-seed', '--org', org.organizationId]).then(
        () => assert.fail('a separation with live wallets must fail'),
        (error: { code: number; stdout: string }) => error,
      );
      assert.equal(refused.code, 1);
      assert.equal(JSON.parse(refused.stdout).outcome, 'refused');
      assert.equal(JSON.parse(refused.stdout).live_wallets, 2);
      assert.deepEqual((await seedsOf(org.organizationId)).map((seed) => seed.id), [seedId, `${seedId}_live`]);
    });

    it('gives an organization without live wallets a fresh live seed on first live use', async () => {
      const { org, keys, wallet, seedId } = await legacyOrganization('Legacy sandbox only', false);
      assert.deepEqual((await seedsOf(org.organizationId)).map((seed) => seed.environment), ['sandbox'], 'nothing to copy');
      const live = await wallet('live');
      const seeds = await seedsOf(org.organizationId);
      assert.equal(seeds[0]!.id, seedId);
      assert.deepEqual([seeds[1]!.environment, seeds[1]!.envelopeVersion, seeds[1]!.sharesSandboxMnemonic], ['live', 2, false]);
      const em = (await testOrm()).em.fork();
      const at = (environment: 'sandbox' | 'live') => app.deps.keys.withKeys(em, org.organizationId, environment, [ACCOUNT_ZERO], ([key]) => key!.address);
      assert.notEqual(await at('sandbox'), await at('live'));
      assert.equal(await signerOf(keys.live, live.id, 'f00d'), live.primary_address.address);
    });

    it('separates a shared live seed that no live wallet uses', async () => {
      const { org, seedId } = await legacyOrganization('Legacy separable', false);
      // A copy no wallet derives from (its live wallets' organization since gone, say).
      await (await testOrm()).em.fork().execute(
        `insert into organization_seeds (id, organization_id, environment, shares_sandbox_mnemonic, envelope_version, key_provider, master_key_id, wrapped_data_key, mnemonic_ciphertext, created_at)
         select id || '_live', organization_id, 'live', true, envelope_version, key_provider, master_key_id, wrapped_data_key, mnemonic_ciphertext, created_at
           from organization_seeds where id = ?`,
        [seedId],
      );
      const listed = JSON.parse((await cli(['keys:seeds'])).stdout);
      const entry = listed.organizations.find((each: { organization_id: string }) => each.organization_id === org.organizationId);
      assert.equal(entry.live_wallets, 0);
      assert.match(entry.what_to_do, new RegExp(`keys:separate-live-seed --org ${org.organizationId}`));

      const separated = JSON.parse((await cli(['keys:separate-live-seed', '--org', org.organizationId])).stdout);
      assert.equal(separated.outcome, 'separated');
      assert.equal(separated.replaced_seed_id, `${seedId}_live`);
      const seeds = await seedsOf(org.organizationId);
      assert.deepEqual(
        seeds.map((seed) => [seed.id, seed.environment, seed.envelopeVersion, seed.sharesSandboxMnemonic]),
        [[seedId, 'sandbox', 1, false], [separated.live_seed_id, 'live', 2, false]],
      );
      assert.equal(JSON.parse((await cli(['keys:separate-live-seed', '--org', org.organizationId])).stdout).outcome, 'already_separate');
      const again = JSON.parse((await cli(['keys:seeds'])).stdout);
      assert.ok(!again.organizations.some((each: { organization_id: string }) => each.organization_id === org.organizationId));
    });
  });

  it('wipes the mnemonic, the seed and the private keys when withKeys returns', async () => {
    const { org, wallet } = await organizationWithBothKeys('Wiped');
    await wallet('live');
    const keys = app.deps.keys as unknown as Record<'openMnemonic' | 'openSeed', (record: OrganizationSeed) => Promise<Buffer>>;
    const nonZero = (bytes: Uint8Array) => bytes.some((byte) => byte !== 0);
    /** Each secret withKeys held, and whether it held something when it was handed on. */
    const held: { name: string; bytes: Uint8Array; wasSet: boolean }[] = [];
    const spy = (name: 'openMnemonic' | 'openSeed') => {
      const original = keys[name];
      keys[name] = async function (this: unknown, record: OrganizationSeed) {
        const bytes = await original.call(this, record);
        held.push({ name, bytes, wasSet: nonZero(bytes) });
        return bytes;
      };
      return () => {
        delete keys[name];
      };
    };
    const restore = [spy('openMnemonic'), spy('openSeed')];
    try {
      const em = (await testOrm()).em.fork();
      const locations = [ACCOUNT_ZERO, { ...ACCOUNT_ZERO, index: 1 }, { chain: 'solana', testnet: false, coinType: 501, format: 'base58', account: 0, index: 0 } as const];
      const mnemonicWhileUsed = await app.deps.keys.withKeys(em, org.organizationId, 'live', locations, (derived) => {
        for (const key of derived) held.push({ name: `private key ${key.path}`, bytes: key.privateKey, wasSet: nonZero(key.privateKey) });
        return held[0]!.bytes.slice();
      });
      assert.deepEqual(held.map(({ name, wasSet }) => [name, wasSet]), [
        ['openMnemonic', true],
        ['openSeed', true],
        ["private key m/44'/60'/0'/0/0", true],
        ["private key m/44'/60'/0'/0/1", true],
        ["private key m/44'/501'/0'/0'", true],
      ]);
      // The mnemonic is gone as soon as the seed is made, before any key is derived.
      assert.equal(nonZero(mnemonicWhileUsed), false);
      for (const { name, bytes } of held) assert.equal(bytesToHex(bytes), '00'.repeat(bytes.length), `${name} is wiped`);
    } finally {
      for (const undo of restore) undo();
    }
  });
});
