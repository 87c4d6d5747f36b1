import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { createOrm, migrate, type Orm } from '../../src/db/orm';
import { keyProviderFor, type KeyProvider } from '../../src/keys/provider';
import type { SealedRow } from '../../src/keys/rotation';
import { sealedColumns } from '../../src/registries';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import type { TestApp } from '../support/app';
import { cli } from '../support/cli';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { terminateWorkflows } from '../support/scanning';
import { softHsmToken, type SoftHsmToken } from '../support/softhsm';
import { WebhookReceiver } from '../support/webhook-receiver';
import { startAppWithWorker } from '../support/worker';

interface Rotation {
  master_key_id: string;
  rows_left: number;
  rows_left_per_table: Record<string, number>;
  columns: { column: string; rewrapped: number; left_per_master_key: Record<string, number> }[];
}

/**
 * `keys:rotate` on a database of its own (it walks every row, so no other test's rows): the service
 * moves from MASTER_KEY to a SoftHSM key, then to a second SoftHSM key while sends and their webhook
 * deliveries run; afterwards every sealed row opens under the second key alone.
 */
describe('keys:rotate: data keys wrapped anew under the current master key, while sends run', () => {
  let hsm: SoftHsmToken;
  let orm: Orm;
  let databaseUrl: string;
  const database = `rotation_${process.pid}_${Date.now()}`;
  const receiver = new WebhookReceiver();
  const taskQueue = `rotation-${randomUUID()}`;
  const chainConfig = { TEMPORAL_TASK_QUEUE: taskQueue, DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_SCAN_INTERVAL_SECONDS: '0.2', CHAIN_CONFIRMATIONS_ETHEREUM: '1' };

  before(async function () {
    hsm = await softHsmToken(this);
    await receiver.start();
    await (await testOrm()).em.getConnection().execute(`create database ${database}`);
    databaseUrl = Object.assign(new URL(process.env.DATABASE_URL!), { pathname: `/${database}` }).toString();
    orm = await createOrm(databaseUrl, 10);
    await migrate(orm);
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, [devnetBlocksWorkflowId('ethereum'), chainScanWorkflowId('ethereum', 'sandbox')]);
    await orm?.close();
    await receiver.close();
    await (await testOrm()).em.getConnection().execute(`drop database if exists ${database} with (force)`);
  });

  /** The API and the worker on this test's database, on one task queue (sends carry on across restarts), with `keys` as their key configuration. */
  const startService = (keys: Record<string, string | undefined>) => startAppWithWorker({ ...chainConfig, ...keys, DATABASE_URL: databaseUrl }, orm);
  const rotate = async (keys: Record<string, string | undefined>, ...args: string[]): Promise<Rotation> => JSON.parse((await cli(['keys:rotate', ...args], databaseUrl, keys)).stdout) as Rotation;

  /** Every sealed row of the database, its data key unwrapped by `provider` (which must hold the key the row names): the count per column. */
  async function openEverySealedRow(provider: KeyProvider): Promise<Record<string, number>> {
    const opened: Record<string, number> = {};
    for (const column of sealedColumns) {
      const rows = await orm.em.fork().execute<SealedRow[]>(`select id, ${column.columns.map((name) => `"${name}"`).join(', ')} from "${column.table}" where ${column.masterKeyIdSql} is not null`);
      for (const row of rows) (await provider.decryptDataKey(column.read(row), column.context(row))).fill(0);
      opened[column.name] = rows.length;
    }
    return opened;
  }

  it('moves from MASTER_KEY to the HSM, then to a second HSM key during sends and deliveries; each row keeps its ciphertext and opens under the new key alone', async () => {
    const localKey = { MASTER_KEY: randomBytes(32).toString('hex') };
    const first = `first-${randomUUID().slice(0, 8)}`;
    const second = `second-${randomUUID().slice(0, 8)}`;
    hsm.createKey(first);
    hsm.createKey(second);

    // The service on MASTER_KEY: a seed (the wallets), a signing secret (the endpoint), stored responses (Idempotency-Key).
    const organization = JSON.parse((await cli(['org:create', '--name', 'Rotation'], databaseUrl)).stdout) as { api_key: { secret: string } };
    const key = organization.api_key.secret;
    let service = await startService(localKey);
    let call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => service.app.request(method, path, { key, body, headers });
    const endpoint = await call('POST', '/v1/webhooks', { name: 'rotation', url: receiver.url });
    assert.equal(endpoint.status, 201, endpoint.text);
    receiver.secrets = [endpoint.body.signing_secret];
    const wallet = async (name: string) => {
      const vault = await call('POST', '/v1/vaults', { name });
      const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.body.id, wallet_type: 'hot' });
      assert.equal(created.status, 201, created.text);
      return { id: created.body.id as string, address: created.body.primary_address.address as string };
    };
    const from = await wallet('from');
    const to = await wallet('to');
    const mine = async (app: TestApp) => assert.equal((await app.request('POST', '/v1/sandbox/chains/ethereum/blocks', { key, body: { count: 1 } })).status, 200);
    /** Mines a block every half second until each send is confirmed; none may fail. */
    const confirm = async (app: TestApp, ids: string[]) => {
      const mining = setInterval(() => void mine(app).catch(() => undefined), 500);
      try {
        await eventually(
          async () => {
            const statuses = await Promise.all(ids.map(async (id) => (await app.request('GET', `/v1/transactions/${id}`, { key })).body.status as string));
            assert.ok(!statuses.includes('failed'), `no send failed: ${statuses.join(', ')}`);
            return statuses.every((status) => status === 'confirmed') ? true : undefined;
          },
          'the sends confirmed',
          90_000,
          500,
        );
      } finally {
        clearInterval(mining);
      }
    };
    const deposit = await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: from.address, asset: 'ETH', amount: '10' });
    assert.equal(deposit.status, 201, deposit.text);
    await mine(service.app);
    const idempotent: { key: string; text: string }[] = [];
    for (let index = 0; index < 12; index++) {
      const idempotencyKey = randomUUID();
      const address = await call('POST', `/v1/wallets/${to.id}/addresses`, { label: `a${index}` }, { 'idempotency-key': idempotencyKey });
      assert.equal(address.status, 201, address.text);
      idempotent.push({ key: idempotencyKey, text: address.text });
    }
    await eventually(async () => ((await call('GET', `/v1/wallets/${from.id}/balances`)).body.data.some((row: { asset_id: string; balance: string }) => row.asset_id === 'ETH' && row.balance !== '0') ? true : undefined), 'the deposit credited');
    await service.stop();

    // To the HSM: the local key stays as a previous key until every row is wrapped anew.
    const toFirst = { ...hsm.config(first), MASTER_KEY_PREVIOUS: localKey.MASTER_KEY };
    const counted = await rotate(toFirst, '--dry-run');
    assert.ok(counted.rows_left_per_table.organization_seeds === 1 && counted.rows_left_per_table.webhook_endpoints === 1, JSON.stringify(counted));
    assert.ok(counted.rows_left_per_table.idempotency_records! >= idempotent.length, 'the stored responses counted');
    assert.ok(counted.columns.every((column) => column.rewrapped === 0), 'a dry run changes nothing');
    const before = await orm.em.fork().execute<{ id: string; mnemonic_ciphertext: string }[]>('select id, mnemonic_ciphertext from organization_seeds');
    const moved = await rotate(toFirst, '--batch-size', '5');
    assert.equal(moved.rows_left, 0, JSON.stringify(moved));
    assert.match(moved.master_key_id, new RegExp(`^pkcs11:${hsm.tokenLabel}/${first}#`));
    assert.equal(moved.columns.reduce((sum, column) => sum + column.rewrapped, 0), Object.values(counted.rows_left_per_table).reduce((sum, count) => sum + count, 0), 'each row counted was wrapped anew');
    assert.deepEqual(await orm.em.fork().execute('select id, mnemonic_ciphertext from organization_seeds'), before, 'the seed ciphertext under its data key is untouched');
    assert.equal((await rotate(toFirst)).columns.reduce((sum, column) => sum + column.rewrapped, 0), 0, 'a second run finds nothing to do');

    // To the second HSM key while sends sign (opening the seed) and deliveries sign (opening the signing secret).
    const toSecond = hsm.config(second, [first]);
    service = await startService(toSecond);
    call = (method, path, body, headers) => service.app.request(method, path, { key, body, headers });
    const sends = await Promise.all(['0.1', '0.2', '0.3'].map((amount) => call('POST', '/v1/transactions', { wallet_id: from.id, to_address: to.address, amount, asset: 'ETH' })));
    for (const send of sends) assert.equal(send.status, 201, send.text);
    const [done] = await Promise.all([rotate(toSecond, '--batch-size', '1'), confirm(service.app, sends.map((send) => send.body.id as string))]);
    assert.equal(done.rows_left, 0, JSON.stringify(done));
    assert.ok(done.columns.find((column) => column.column === 'organization_seeds.wrapped_data_key')!.rewrapped === 1, 'the seed moved during the sends');
    const delivered = (id: string) => receiver.attempts.filter((attempt) => JSON.parse(attempt.body).data?.id === id);
    await eventually(async () => (sends.every((send) => delivered(send.body.id).some((attempt) => JSON.parse(attempt.body).type === 'transaction.confirmed')) ? true : undefined), 'the confirmations delivered');
    assert.ok(receiver.attempts.every((attempt) => attempt.verifiedWith[0]), 'every delivery signed with the endpoint secret');
    await service.stop();

    // The first key removed from the configuration: every sealed row opens under the second alone, and the service works on it.
    const after = hsm.config(second);
    assert.equal((await rotate(after, '--dry-run')).rows_left, 0);
    const opened = await openEverySealedRow(keyProviderFor(testConfig({ ...after, DATABASE_URL: databaseUrl })));
    assert.equal(opened['organization_seeds.wrapped_data_key'], 1);
    assert.equal(opened['webhook_endpoints.secret_current'], 1);
    assert.ok(opened['idempotency_records.response_body']! >= idempotent.length, JSON.stringify(opened));
    service = await startService(after);
    call = (method, path, body, headers) => service.app.request(method, path, { key, body, headers });
    try {
      for (const stored of idempotent) {
        const replay = await call('POST', `/v1/wallets/${to.id}/addresses`, { label: `a${idempotent.indexOf(stored)}` }, { 'idempotency-key': stored.key });
        assert.equal(replay.text, stored.text, 'a response stored under MASTER_KEY replays byte for byte');
      }
      const last = await call('POST', '/v1/transactions', { wallet_id: from.id, to_address: to.address, amount: '0.4', asset: 'ETH' });
      assert.equal(last.status, 201, last.text);
      await confirm(service.app, [last.body.id]);
      await eventually(async () => (delivered(last.body.id).length > 0 ? true : undefined), 'its events delivered');
      assert.ok(delivered(last.body.id).every((attempt) => attempt.verifiedWith[0]));
    } finally {
      await service.stop();
    }
  });
});
