import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { CHAIN_IDS } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { ChainNodes } from '../../src/chains/nodes';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { ledgerReconciliationWorkflowType, type LedgerReconciliationInput } from '../../src/monitoring/flows/ledger-reconciliation';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { workflowBundle } from '../../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { cli } from '../support/cli';
import { localTemporal, testConfig, testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { loadHistory, recordHistoryIfAsked } from '../support/histories';
import { creditCustodyWallet } from '../support/ledger';
import { terminateWorkflows } from '../support/scanning';
import { testLogger } from '../support/secret-scan';
import { WebhookReceiver } from '../support/webhook-receiver';
import { RestartableWorker } from '../support/worker';

const ETHER = 10n ** 18n;

/** The ledger reconciliation against the Ethereum devnet, through the real scanner, Temporal, PostgreSQL and webhooks. */
describe('Ledger reconciliation: the custody ledger compared with the chain', () => {
  let app: TestApp;
  let org: TestOrganization;
  const receiver = new WebhookReceiver();
  const taskQueue = `ledger-reconciliation-${randomUUID()}`;
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_SCAN_INTERVAL_SECONDS: '0.2', CHAIN_CONFIRMATIONS_ETHEREUM: '2' };
  const worker = new RestartableWorker(taskQueue, config);

  before(async () => {
    await receiver.start();
    app = await startTestApp({ config });
    await worker.start();
    org = await createTestOrganization('Reconciled');
    const endpoint = await app.request('POST', '/v1/webhooks', { key: org.secret, body: { name: 'drifts', url: receiver.url, event_types: ['ledger.drift'] } });
    assert.equal(endpoint.status, 201, endpoint.text);
    receiver.secrets = [endpoint.body.signing_secret];
  });
  after(async () => {
    await terminateWorkflows((await localTemporal()).client, CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]));
    await worker.stop();
    await app?.close();
    await receiver.close();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  async function wallet(name: string) {
    const vault = await call('POST', '/v1/vaults', { name });
    const created = await call('POST', '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.body.id });
    assert.equal(created.status, 201, created.text);
    return { id: created.body.id as string, address: created.body.primary_address.address as string };
  }
  const ethBalance = async (walletId: string) =>
    ((await call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string }[]).find((row) => row.asset_id === 'ETH')!.balance;
  /** One pass over the organization's Ethereum addresses, retried while the scanner has not read the tip yet. */
  const pass = (recordAs?: string) =>
    eventually(async () => {
      const input: LedgerReconciliationInput = { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId };
      const handle = await (await localTemporal()).client.workflow.start(ledgerReconciliationWorkflowType, { args: [input], taskQueue, workflowId: `ledger-reconciliation-test-${randomUUID()}` });
      const result = (await handle.result()) as { compared: number; skipped?: string };
      if (result.skipped) return undefined;
      if (recordAs) await recordHistoryIfAsked(handle, recordAs);
      return result;
    }, 'a reconciliation pass with the scanner at the tip');
  const drifts = async () =>
    (await testOrm()).em
      .fork()
      .execute<{ wallet_id: string; status: string; ledger_amount: string; chain_amount: string }[]>(
        `select wallet_id, status::text, ledger_amount::text, chain_amount::text from ledger_drifts where organization_id = ? order by first_seen_at`,
        [org.organizationId],
      );
  const driftEvents = () => receiver.attempts.map((attempt) => JSON.parse(attempt.body) as { type: string; data: Record<string, string> }).filter((event) => event.type === 'ledger.drift');

  it('opens what no transaction explains and a ledger ahead of the chain in one pass at the scanned block, credits the surplus once final; resolves the rest once they agree', async () => {
    const surplus = await wallet('Contract deposits');
    const ahead = await wallet('Ledger ahead');
    const deposit = await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: surplus.address, asset: 'ETH', amount: '1' });
    assert.equal(deposit.status, 201, deposit.text);
    await call('POST', '/v1/sandbox/chains/ethereum/blocks', { count: 2 });
    await eventually(async () => ((await ethBalance(surplus.id)) === ETHER.toString() ? true : undefined), 'the scanned deposit credited');
    const em = (await testOrm()).em.fork();
    // A contract's internal transfer: the chain's balance grows with no transaction the scanner reads.
    await em.execute(`update devnet_balances set amount = amount + ? where chain = 'ethereum' and address = ? and asset_id = 'ETH'`, [(ETHER / 4n).toString(), surplus.address]);
    // The ledger says 0.4 ETH the chain never held.
    await creditCustodyWallet(em, ahead.id, 'ETH', (4n * ETHER) / 10n);

    const first = await pass();
    assert.ok(first.compared >= 2, 'both addresses compared');
    assert.equal(await ethBalance(surplus.id), ETHER.toString(), 'a surplus at the newest block is not credited: it is not final');
    let statuses = Object.fromEntries((await drifts()).map((drift) => [drift.wallet_id, drift]));
    assert.deepEqual([statuses[surplus.id]!.status, statuses[ahead.id]!.status], ['open', 'open']);
    assert.deepEqual([statuses[ahead.id]!.ledger_amount, statuses[ahead.id]!.chain_amount], [((4n * ETHER) / 10n).toString(), '0']);
    await eventually(async () => (driftEvents().length === 2 ? true : undefined), 'two ledger.drift events delivered');
    const events = Object.fromEntries(driftEvents().map((event) => [event.data.wallet_id, event.data]));
    assert.deepEqual(
      { status: events[ahead.id]!.status, figure: events[ahead.id]!.figure, ledger: events[ahead.id]!.ledger_amount, chain: events[ahead.id]!.chain_amount, address: events[ahead.id]!.address },
      { status: 'open', figure: 'balance', ledger: '0.4', chain: '0', address: ahead.address },
    );
    assert.deepEqual([events[surplus.id]!.status, events[surplus.id]!.difference_raw, events[surplus.id]!.credited_amount_raw], ['open', (ETHER / 4n).toString(), null]);

    // The block it was seen at is final once CHAIN_CONFIRMATIONS_ETHEREUM (2) deep: one block later, the surplus is credited.
    await call('POST', '/v1/sandbox/chains/ethereum/blocks', { count: 1 });
    await pass();
    assert.equal(await ethBalance(surplus.id), ((5n * ETHER) / 4n).toString(), 'the final unattributed deposit credited');
    const [entry] = await em.execute<{ kind: string; balance: string }[]>(`select kind, balance::text from custody_journal_entries where wallet_id = ? and kind = 'unattributed_deposit'`, [surplus.id]);
    assert.deepEqual(entry, { kind: 'unattributed_deposit', balance: (ETHER / 4n).toString() });
    statuses = Object.fromEntries((await drifts()).map((drift) => [drift.wallet_id, drift]));
    assert.deepEqual([statuses[surplus.id]!.status, statuses[ahead.id]!.status], ['credited', 'open']);
    await eventually(async () => (driftEvents().length === 3 ? true : undefined), 'the credit announced');
    const credit = driftEvents().find((event) => event.data.status === 'credited')!;
    assert.deepEqual([credit.data.wallet_id, credit.data.credited_amount_raw], [surplus.id, (ETHER / 4n).toString()]);

    // A further pass finds the same: nothing credited twice, no further event.
    await pass('ledger-reconciliation-pinned');
    assert.equal(await ethBalance(surplus.id), ((5n * ETHER) / 4n).toString());
    assert.equal(driftEvents().length, 3);

    // The operator sees it: the CLI lists the open drift, /metrics counts it.
    const listed = JSON.parse((await cli(['ledger:drift', '--org', org.organizationId])).stdout) as { count: number; drifts: { wallet_id: string; ledger_amount_raw: string; chain_amount_raw: string }[] };
    assert.equal(listed.count, 1);
    assert.deepEqual([listed.drifts[0]!.wallet_id, listed.drifts[0]!.ledger_amount_raw, listed.drifts[0]!.chain_amount_raw], [ahead.id, ((4n * ETHER) / 10n).toString(), '0']);
    await assert.rejects(cli(['ledger:drift', '--status', 'gone']), /--status must be one of/);
    const metrics = await app.request('GET', '/metrics');
    assert.match(metrics.text, /custody_ledger_drifts\{chain="ethereum",environment="sandbox",asset="ETH",status="open"\} [1-9]/);
    // The pass says it covered them: when it ended, how long it took, how many holders it compared.
    const holders = Number(/custody_reconciliation_holders_compared\{chain="ethereum",environment="sandbox"\} (\d+)/.exec(metrics.text)?.[1]);
    assert.equal(holders, 2, metrics.text);
    const ended = Number(/custody_reconciliation_last_complete_pass_timestamp_seconds\{chain="ethereum",environment="sandbox"\} ([\d.e+]+)/.exec(metrics.text)?.[1]);
    assert.ok(Math.abs(ended - Date.now() / 1000) < 120, `the last pass ended just now: ${ended}`);
    assert.match(metrics.text, /custody_reconciliation_pass_duration_seconds\{chain="ethereum",environment="sandbox"\} [\d.e+-]+/);

    // Corrected by hand (a journal entry): the next pass finds them agreeing and resolves the drift.
    await creditCustodyWallet(em, ahead.id, 'ETH', -(4n * ETHER) / 10n);
    await pass();
    assert.deepEqual((await drifts()).map((drift) => drift.status).sort(), ['credited', 'resolved']);
    const nodes = new ChainNodes(testConfig(config), testLogger('test'), await testOrm());
    const compared = await compareLedgerWithChain(em, await nodes.provider('ethereum', 'sandbox'), { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId });
    assert.deepEqual(compared.mismatches, [], 'the ledger equals the chain');
  });

  it("nets a surplus against what the wallet's other addresses lack: only what the wallet holds beyond its ledger is credited", async () => {
    const misbooked = await wallet('Misbooked deposits');
    const second = await call('POST', `/v1/wallets/${misbooked.id}/addresses`, {});
    assert.equal(second.status, 201, second.text);
    const em = (await testOrm()).em.fork();
    // 0.25 ETH arrived on the primary address unseen; the ledger put 0.1 ETH on the second address that never arrived there.
    await em.execute(`insert into devnet_balances (chain, address, asset_id, amount) values ('ethereum', ?, 'ETH', ?) on conflict (chain, address, asset_id) do update set amount = devnet_balances.amount + excluded.amount`, [
      misbooked.address,
      (ETHER / 4n).toString(),
    ]);
    await creditCustodyWallet(em, misbooked.id, 'ETH', ETHER / 10n, { address: second.body.address });
    await pass();
    await call('POST', '/v1/sandbox/chains/ethereum/blocks', { count: 1 });
    await pass();
    const mine = (await drifts()).filter((drift) => drift.wallet_id === misbooked.id).sort((a, b) => a.status.localeCompare(b.status));
    assert.deepEqual(
      mine.map((drift) => [drift.status, drift.ledger_amount, drift.chain_amount]),
      [
        ['credited', '0', (ETHER / 4n).toString()],
        ['open', (ETHER / 10n).toString(), '0'],
      ],
      'the surplus credited less the second address deficit; the deficit open',
    );
    const [credited] = await em.execute<{ credited_amount: string }[]>(`select credited_amount::text from ledger_drifts where wallet_id = ? and status = 'credited'`, [misbooked.id]);
    assert.equal(credited!.credited_amount, ((ETHER * 15n) / 100n).toString());
    assert.equal(await ethBalance(misbooked.id), ((ETHER * 25n) / 100n).toString(), 'the wallet holds what the chain holds: 0.15 credited beside the 0.1 misbooked');

    // What stays on the primary address beyond its ledger (0.1) is a new drift that the wallet's deficit cancels: never credited.
    await pass();
    await call('POST', '/v1/sandbox/chains/ethereum/blocks', { count: 1 });
    await pass();
    const later = (await drifts()).filter((drift) => drift.wallet_id === misbooked.id && drift.status === 'open');
    assert.deepEqual(later.map((drift) => BigInt(drift.chain_amount) - BigInt(drift.ledger_amount)).sort(), [-(ETHER / 10n), ETHER / 10n].sort());
    assert.equal(await ethBalance(misbooked.id), ((ETHER * 25n) / 100n).toString(), 'nothing more credited');
  });

  it('replays the recorded passes (before and after the pass waited for the scanner) with the current workflow code', async () => {
    for (const name of ['ledger-reconciliation', 'ledger-reconciliation-pinned']) {
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, await loadHistory(name), name);
    }
  });
});
