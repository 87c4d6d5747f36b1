import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { bytesToHex } from '@noble/hashes/utils';
import type { Hex } from 'viem';
import { ChainNodes } from '../../src/chains/nodes';
import { Address } from '../../src/custody/entities';
import { keyLocation } from '../../src/custody/service';
import { ChainScanCursor } from '../../src/monitoring/entities';
import { compareLedgerWithChain } from '../../src/monitoring/ledger-check';
import { anvilFunder, anvilHeight, anvilMine, anvilSandboxConfig, deployAnvilToken, startAnvil, type Anvil } from './anvil';
import type { TestApp, TestOrganization } from './app';
import { testConfig, testOrm } from './environment';
import { eventually } from './eventually';
import { suspenseBalance, suspenseMoves } from './ledger';
import { startScannedService, type ScannedService } from './scanned-service';
import { createHotWallet, startReconciliationPass } from './reconciliation';
import { testLogger } from './secret-scan';
import { WebhookReceiver } from './webhook-receiver';

/** The confirmation count of the reorganisation tests: the forks they make are deeper. */
export const REORG_CONFIRMATIONS = 3;

/**
 * What the reorganisation tests on anvil share: a node, the scanned service with an organization and
 * its webhook endpoint (started before the file's tests, stopped after), and the reads and moves they
 * make. A branch is abandoned with evm_snapshot / evm_revert and a longer one mined.
 */
export function anvilReorganisations(name: string) {
  let anvil: Anvil;
  let app: TestApp;
  let org: TestOrganization;
  let service: ScannedService;
  const receiver = new WebhookReceiver();
  const config: Record<string, string> = {};

  const funder = () => anvilFunder(anvil);
  const mine = (blocks: number) => anvilMine(anvil, blocks);
  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });

  before(async () => {
    anvil = await startAnvil();
    const token = await deployAnvilToken(anvil);
    await receiver.start();
    const taskQueue = `${name}-${randomUUID()}`;
    Object.assign(config, anvilSandboxConfig(anvil, taskQueue, token, REORG_CONFIRMATIONS));
    service = await startScannedService('ethereum', name, config, () => anvilHeight(anvil));
    ({ app, org } = service);
    const endpoint = await call('POST', '/v1/webhooks', { name: 'reorgs', url: receiver.url });
    receiver.secrets = [endpoint.body.signing_secret];
  });

  after(async () => {
    await service?.stop();
    await receiver.close();
    await anvil?.stop();
  });

  async function createWallet(name: string) {
    const wallet = await createHotWallet(service, name, 'ethereum');
    return { id: wallet.id, address: wallet.address as Hex };
  }
  /** A new wallet holding `amount` ETH, its deposit confirmed. */
  async function fundedWallet(name: string, amount: bigint) {
    const wallet = await createWallet(name);
    await funder().sendTransaction({ to: wallet.address, value: amount });
    await mine(REORG_CONFIRMATIONS);
    await eventually(async () => ((await ethOf(wallet.id)).balance === amount ? true : undefined), `${name} funded`);
    return wallet;
  }
  /** A send of `amount` ETH through the API, once a node has it: its id. */
  async function broadcastSend(walletId: string, to: string, amount: string) {
    const created = await call('POST', '/v1/transactions', { wallet_id: walletId, to_address: to, amount, asset: 'ETH' });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    await eventually(async () => ((await call('GET', `/v1/transactions/${id}`)).body.status === 'broadcast' ? true : undefined), 'send broadcast');
    return id;
  }
  async function ethOf(walletId: string) {
    const rows = (await call('GET', `/v1/wallets/${walletId}/balances`)).body.data as { asset_id: string; balance: string; pending: string }[];
    const row = rows.find((candidate) => candidate.asset_id === 'ETH')!;
    return { balance: BigInt(row.balance), pending: BigInt(row.pending) };
  }
  const cursor = async () => (await testOrm()).em.fork().findOneOrFail(ChainScanCursor, { chain: 'ethereum', environment: 'sandbox' });
  async function scannedToTip() {
    const tip = Number(await anvil.call('eth_blockNumber'));
    await eventually(async () => ((await cursor()).height >= tip ? true : undefined), 'scanning caught up with the tip', 60_000);
  }
  /**
   * The invariant once the service has caught up: a scan that follows a reorganisation to its fork takes every
   * settled send above it off its block, even one its workflow had already settled in the new chain, and places it
   * again at the end of that pass or the next (resettleRemined); the comparison is repeated until then.
   */
  async function ledgerMatchesChain() {
    const provider = await new ChainNodes(testConfig(config), testLogger('test'), await testOrm()).provider('ethereum', 'sandbox');
    let mismatches: unknown[] = [];
    await eventually(
      async () => {
        await scannedToTip();
        ({ mismatches } = await compareLedgerWithChain((await testOrm()).em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId, assetIds: ['ETH'] }));
        return mismatches.length === 0 ? true : undefined;
      },
      'the ledger equal to the chain',
      30_000,
      500,
    ).catch(() => assert.deepEqual(mismatches, []));
  }
  const journalOf = async (referencePrefix: string) =>
    (await testOrm()).em
      .fork()
      .getConnection()
      .execute<{ kind: string; reference_id: string; balance: string; pending: string }[]>(
        `select kind, reference_id, balance::text, pending::text from custody_journal_entries where reference_id like ? order by created_at, kind`,
        [`${referencePrefix}%`],
      );
  /** What the organization's suspense account holds of ETH: value a reorganisation made unknown, waiting for the chain's proof. */
  const suspense = () => suspenseBalance(org.organizationId, 'ETH');
  /** A client of the wallet's custody key, as someone holding it outside the platform would sign. */
  async function usedOutside(walletId: string) {
    const em = (await testOrm()).em.fork();
    const primary = await em.findOneOrFail(Address, { wallet: walletId, isPrimary: true }, { populate: ['wallet'] });
    const key = await app.deps.keys.withKeys(em, org.organizationId, primary.wallet.environment, [keyLocation(primary.wallet, primary.format, primary.addressIndex)], ([derived]) => `0x${bytesToHex(derived!.privateKey)}` as Hex);
    return anvilFunder(anvil, key);
  }
  /** One ledger reconciliation pass of the organization's Ethereum holders, at the scanner's block once it has read the tip. */
  async function reconcile() {
    await scannedToTip();
    const handle = await startReconciliationPass({ chain: 'ethereum', environment: 'sandbox', organizationId: org.organizationId }, config.TEMPORAL_TASK_QUEUE!);
    const result = (await handle.result()) as { compared: number; skipped?: string };
    assert.equal(result.skipped, undefined, 'the pass compared at the scanned block');
  }
  const events = () => receiver.attempts.map((attempt) => JSON.parse(attempt.body) as { type: string; data: Record<string, unknown> });
  /** Sends signed bytes again, where the abandoned branch's pool may or may not still hold them. */
  async function broadcastAgain(raw: string) {
    await anvil.call('eth_sendRawTransaction', [raw]).catch((error: Error) => {
      if (!/already|known/i.test(error.message)) throw error;
    });
  }

  return {
    get anvil() {
      return anvil;
    },
    get app() {
      return app;
    },
    get org() {
      return org;
    },
    funder,
    mine,
    call,
    createWallet,
    fundedWallet,
    broadcastSend,
    ethOf,
    cursor,
    scannedToTip,
    ledgerMatchesChain,
    journalOf,
    suspense,
    suspenseMoves,
    usedOutside,
    events,
    broadcastAgain,
    reconcile,
  };
}
