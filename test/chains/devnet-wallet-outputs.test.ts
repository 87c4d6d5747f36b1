import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { DevnetOutput } from '../../src/chains/devnet/entities';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { WalletOutput } from '../../src/transactions/entities';
import { spendableOutputs } from '../../src/transactions/wallet-outputs';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { localTemporal, testOrm } from '../support/environment';
import { terminateWorkflows } from '../support/scanning';
import { createTestWorker } from '../support/worker';

const CONFIRMATIONS = 2;

describe('Bitcoin deposits on the embedded devnet become spendable wallet outputs', () => {
  let app: TestApp;
  let worker: Worker;
  let running: Promise<void>;
  let org: TestOrganization;
  const taskQueue = `devnet-wallet-outputs-${randomUUID()}`;
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_SCAN_INTERVAL_SECONDS: '0.2', CHAIN_CONFIRMATIONS_BITCOIN: String(CONFIRMATIONS) };

  before(async () => {
    app = await startTestApp({ config });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Devnet wallet outputs');
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, [devnetBlocksWorkflowId('bitcoin'), chainScanWorkflowId('bitcoin', 'sandbox')]);
    worker?.shutdown();
    await running;
    await app?.close();
  });

  it('each deposit is an output the devnet holds: unconfirmed, then available at the confirmation count', async () => {
    const vault = await app.request('POST', '/v1/vaults', { key: org.secret, body: { name: 'Outputs' } });
    const wallet = await app.request('POST', '/v1/wallets', { key: org.secret, body: { name: 'BTC', chain: 'bitcoin', vault_id: vault.body.id } });
    const taproot = await app.request('POST', `/v1/wallets/${wallet.body.id}/addresses`, { key: org.secret, body: { address_format: 'p2tr' } });
    const legacy = await app.request('POST', `/v1/wallets/${wallet.body.id}/addresses`, { key: org.secret, body: { address_format: 'p2pkh' } });
    const addresses = [wallet.body.primary_address, taproot.body, legacy.body] as { id: string; address: string; format: string }[];
    const em = () => testOrm().then((orm) => orm.em.fork());
    const rows = async () => (await em()).find(WalletOutput, { wallet: wallet.body.id }, { orderBy: { amount: 'asc' } });
    const mine = async (count: number) => {
      const mined = await app.request('POST', '/v1/sandbox/chains/bitcoin/blocks', { key: org.secret, body: { count } });
      assert.equal(mined.body.scanned, true, mined.text);
    };
    // One deposit a block: the devnet cannot yet mine a faucet payment together with the one spending its change.
    const deposits: { txid: string; vout: number; amount: string; address: (typeof addresses)[number] }[] = [];
    for (const [index, address] of addresses.entries()) {
      const response = await app.request('POST', '/v1/sandbox/deposits', { key: org.secret, body: { chain: 'bitcoin', address: address.address, asset: 'BTC', amount: `0.00${index + 1}5` } });
      assert.equal(response.status, 201, response.text);
      const deposit = { txid: response.body.tx_hash, vout: Number(response.body.position.replace('out:', '')), amount: response.body.amount_raw, address };
      deposits.push(deposit);
      const row = (await rows()).at(-1)!;
      assert.deepEqual([row.txid, row.vout, row.amount, row.address.id, row.origin, row.status], [deposit.txid, deposit.vout, deposit.amount, address.id, 'deposit', 'unconfirmed']);
      // The outpoint is the devnet's own: an output to that address with that amount.
      const onChain = await (await em()).findOneOrFail(DevnetOutput, { chain: 'bitcoin', txid: deposit.txid, vout: deposit.vout });
      assert.deepEqual([onChain.address, onChain.amount, onChain.spentBy], [address.address, deposit.amount, null]);
      await mine(1);
    }
    // Two confirmations: all but the last deposit; one more block confirms it.
    assert.deepEqual(
      (await rows()).map((row) => row.status),
      ['available', 'available', 'unconfirmed'],
    );
    await mine(CONFIRMATIONS - 1);
    assert.ok((await rows()).every((row) => row.status === 'available'));
    const spendable = await (await em()).transactional((tx) => spendableOutputs(tx, { id: wallet.body.id }));
    assert.deepEqual(
      spendable.map((output) => [output.txid, output.vout, output.amount.toString(), output.format]).sort(),
      deposits.map((deposit) => [deposit.txid, deposit.vout, deposit.amount, deposit.address.format]).sort(),
    );
  });
});
