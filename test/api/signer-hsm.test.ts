import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { OrganizationSeed } from '../../src/keys/entities';
import { KeyService, seedContexts } from '../../src/keys/service';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import type { ServiceWorkers } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { terminateWorkflows } from '../support/scanning';
import { softHsmToken } from '../support/softhsm';
import { createTestWorker } from '../support/worker';

/**
 * The production shape of key custody on an HSM: the data key and the seed key are two keys on one
 * SoftHSM token; the worker is given both, the API the data key only. A send and a signature run end to
 * end with the seed sealed under the HSM's seed key, which the API cannot use.
 */
describe('Key custody on an HSM: seeds sealed under a seed key only the signer holds', () => {
  let app: TestApp;
  let org: TestOrganization;
  let worker: ServiceWorkers;
  let running: Promise<void>;
  let seedLabel: string;
  let tokenLabel: string;
  const taskQueue = `signer-hsm-${randomUUID()}`;
  const chainConfig = { TEMPORAL_TASK_QUEUE: taskQueue, DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_SCAN_INTERVAL_SECONDS: '0.2', CHAIN_CONFIRMATIONS_ETHEREUM: '1' };

  before(async function () {
    const hsm = await softHsmToken(this);
    tokenLabel = hsm.tokenLabel;
    const dataLabel = `data-${randomUUID().slice(0, 8)}`;
    seedLabel = `seed-${randomUUID().slice(0, 8)}`;
    hsm.createKey(dataLabel);
    hsm.createKey(seedLabel);
    const production = { ...hsm.config(dataLabel), NODE_ENV: 'production', ...chainConfig };
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, { ...production, PKCS11_SEED_KEY_LABEL: seedLabel }));
    running = worker.run();
    app = await startTestApp({ config: production });
    org = await createTestOrganization('Signer on an HSM');
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, [devnetBlocksWorkflowId('ethereum'), chainScanWorkflowId('ethereum', 'sandbox')]);
    await app?.close();
    worker?.shutdown();
    await running;
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const mine = async () => assert.equal((await call('POST', '/v1/sandbox/chains/ethereum/blocks', { count: 1 })).status, 200);

  it('creates wallets, sends and signs through the worker; the seed row names the HSM seed key, which the API does not hold', async () => {
    assert.equal(app.deps.keys.signer, false, 'the API holds no seed key');
    const vault = await call('POST', '/v1/vaults', { name: 'hsm' });
    const wallet = async (name: string) => {
      const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
      assert.equal(created.status, 201, created.text);
      return { id: created.body.id as string, address: created.body.primary_address.address as string };
    };
    const from = await wallet('from');
    const to = await wallet('to');

    const em = (await testOrm()).em.fork();
    const seed = await em.findOneOrFail(OrganizationSeed, { organization: org.organizationId, environment: 'sandbox' });
    assert.match(seed.masterKeyId, new RegExp(`^pkcs11:${tokenLabel}/${seedLabel}#`));
    const contexts = seedContexts({ envelopeVersion: seed.envelopeVersion, organizationId: org.organizationId, environment: 'sandbox' });
    const sealed = { keyProvider: seed.keyProvider, masterKeyId: seed.masterKeyId, wrappedDataKey: seed.wrappedDataKey, ciphertext: seed.mnemonicCiphertext };
    await assert.rejects(new KeyService(app.deps.keys.provider).open(sealed, contexts.dataKey, contexts.mnemonic), /wrapped under/, "the API's data key does not open the seed");

    assert.equal((await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: from.address, asset: 'ETH', amount: '2' })).status, 201);
    await mine();
    const ethRaw = async (walletId: string) => (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data.find((row: { asset_id: string }) => row.asset_id === 'ETH')?.balance_raw as string | undefined;
    await eventually(async () => ((await ethRaw(from.id)) === String(2n * 10n ** 18n) ? true : undefined), 'the deposit credited');

    const send = await call('POST', '/v1/transactions', { wallet_id: from.id, to_address: to.address, amount: '0.5', asset: 'ETH' });
    assert.equal(send.status, 201, send.text);
    const mining = setInterval(() => void mine().catch(() => undefined), 500);
    try {
      await eventually(
        async () => {
          const status = (await call('GET', `/v1/transactions/${send.body.id}`)).body.status as string;
          assert.notEqual(status, 'failed');
          return status === 'confirmed' ? true : undefined;
        },
        'the send confirmed',
        60_000,
        300,
      );
    } finally {
      clearInterval(mining);
    }
    await eventually(async () => ((await ethRaw(to.id)) === String(5n * 10n ** 17n) ? true : undefined), 'the recipient credited');

    const signed = await call('POST', `/v1/wallets/${from.id}/sign`, { payload: 'signed on the HSM seed', payload_encoding: 'text_utf8' });
    assert.equal(signed.status, 200, signed.text);
    assert.equal(await em.count('SigningActivity', { id: signed.body.activity_id, seedId: seed.id }), 1, 'the activity row names the seed that signed');
  });
});
