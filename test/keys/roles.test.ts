import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ConfigError, loadConfig } from '../../src/config';
import { OrganizationSeed } from '../../src/keys/entities';
import { createSeedKeyProvider, keyProviderFor, seedKeyProviderFor } from '../../src/keys/provider';
import { rotateSealedColumns } from '../../src/keys/rotation';
import { organizationSeedColumn } from '../../src/keys/seed-column';
import { keyServiceFor } from '../../src/keys/service';
import { createTestOrganization } from '../support/app';
import { testConfig, testOrm } from '../support/environment';
import { testLogger } from '../support/secret-scan';

const DATABASE_URL = 'postgresql://localhost/unused';
const dataKey = randomBytes(32).toString('hex');
const seedKey = randomBytes(32).toString('hex');

describe('Key roles: the data key for every process, the seed key for signers', () => {
  it('builds each role from its own variables; outside production a process without a seed key falls back to the data key, unless told not to', () => {
    const split = loadConfig({ DATABASE_URL, MASTER_KEY: dataKey, SEED_MASTER_KEY: seedKey });
    assert.notEqual(seedKeyProviderFor(split)!.masterKeyId, keyProviderFor(split).masterKeyId);
    const fallback = loadConfig({ DATABASE_URL, MASTER_KEY: dataKey });
    assert.equal(seedKeyProviderFor(fallback), keyProviderFor(fallback));
    assert.equal(seedKeyProviderFor(loadConfig({ DATABASE_URL, MASTER_KEY: dataKey, SEED_KEY_FALLBACK: 'none' })), undefined);
  });

  it('never falls back in production: the API holds no seed key, and a worker without one does not start', () => {
    const api = loadConfig({ DATABASE_URL, NODE_ENV: 'production', MASTER_KEY: dataKey });
    assert.equal(seedKeyProviderFor(api), undefined);
    assert.equal(createSeedKeyProvider(api, testLogger('api'), 'api'), undefined);
    assert.throws(() => createSeedKeyProvider(api, testLogger('worker'), 'worker'), (error: Error) => error instanceof ConfigError && /SEED_MASTER_KEY: the worker signs/.test(error.message));
    const worker = loadConfig({ DATABASE_URL, NODE_ENV: 'production', MASTER_KEY: dataKey, SEED_MASTER_KEY: seedKey });
    assert.ok(createSeedKeyProvider(worker, testLogger('worker'), 'worker'));
  });

  it('refuses a seed key of the other provider, and a malformed one without echoing it', () => {
    assert.throws(() => loadConfig({ DATABASE_URL, SEED_MASTER_KEY: 'not-a-key-at-all' }), (error: Error) => /SEED_MASTER_KEY must be 32 bytes/.test(error.message) && !error.message.includes('not-a-key-at-all'));
    assert.throws(
      () => loadConfig({ DATABASE_URL, KEY_PROVIDER: 'pkcs11', PKCS11_LIBRARY: '/x.so', PKCS11_TOKEN_LABEL: 't', PKCS11_PIN: '1', PKCS11_KEY_LABEL: 'k', SEED_MASTER_KEY: seedKey }),
      /SEED_MASTER_KEY is the seed key of KEY_PROVIDER=local/,
    );
    assert.throws(() => loadConfig({ DATABASE_URL, PKCS11_SEED_KEY_LABEL: 'seeds' }), /PKCS11_SEED_KEY_LABEL is the seed key of KEY_PROVIDER=pkcs11/);
  });

  it('moves seeds sealed under the data key to the seed key: keys:rotate with the data key as a previous seed key', async () => {
    const org = await createTestOrganization('Seeds moving');
    const em = (await testOrm()).em.fork();
    // Before the split: the seed sealed under the data key (the fallback).
    const before = testConfig({ MASTER_KEY: dataKey, SEED_MASTER_KEY: undefined, SEED_KEY_FALLBACK: 'data' });
    const old = keyServiceFor(before);
    const location = { chain: 'ethereum', testnet: true, coinType: 1, format: 'eip55', account: 0, index: 0 } as const;
    const address = await old.withKeys(em, org.organizationId, 'sandbox', [location], ([key]) => key!.address);
    const seed = await em.findOneOrFail(OrganizationSeed, { organization: org.organizationId, environment: 'sandbox' });
    assert.equal(seed.masterKeyId, keyProviderFor(before).masterKeyId);

    // The signer gets the seed key, with the data key as a previous one until the rotation is done.
    const moving = testConfig({ MASTER_KEY: dataKey, SEED_MASTER_KEY: seedKey, SEED_MASTER_KEY_PREVIOUS: dataKey });
    // This organization's row only: the database holds other tests' seeds, under other keys.
    const ofThisOrganization = { ...organizationSeedColumn, masterKeyIdSql: `case when organization_id = '${org.organizationId}' then master_key_id end` };
    const [rotated] = await rotateSealedColumns(em, seedKeyProviderFor(moving)!, [ofThisOrganization]);
    assert.deepEqual({ rewrapped: rotated!.rewrapped, left: rotated!.left }, { rewrapped: 1, left: {} });

    // Then the seed key alone opens it, and the data key no longer does.
    const after = testConfig({ MASTER_KEY: dataKey, SEED_MASTER_KEY: seedKey });
    const signer = keyServiceFor(after);
    assert.equal(await signer.withKeys(em.fork(), org.organizationId, 'sandbox', [location], ([key]) => key!.address), address);
    await assert.rejects(old.withKeys(em.fork(), org.organizationId, 'sandbox', [location], ([key]) => key!.address), /wrapped under local:/);
  });
});
