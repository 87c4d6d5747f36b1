import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { AddressBookEntry } from '../../src/address-book/entities';
import { CHAIN_IDS } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { DEVNET_TOKENS } from '../../src/chains/devnet/params';
import { ConsolidationRule, ConsolidationRun, ConsolidationSweep } from '../../src/consolidation/entities';
import { consolidationRunFlow } from '../../src/consolidation/flows/run';
import { triggerThresholdRules } from '../../src/consolidation/thresholds';
import { triggerRun } from '../../src/consolidation/runs';
import { Address } from '../../src/custody/entities';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { IncomingTransfer } from '../../src/monitoring/entities';
import { Organization } from '../../src/organizations/entities';
import { Money, toDisplay } from '../../src/shared/money';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization, type TestResponse } from '../support/app';
import { localTemporal } from '../support/environment';
import { eventually } from '../support/eventually';
import { releaseTogether } from '../support/rule-lock';
import { terminateWorkflows } from '../support/scanning';
import { createTestWorker } from '../support/worker';

const RULE_FIELDS = [
  'id',
  'object',
  'org_id',
  'vault_id',
  'chain',
  'network',
  'enabled',
  'destination_type',
  'destination_address_book_id',
  'destination_vault_id',
  'gas_source',
  'gas_station_id',
  'assets',
  'trigger_type',
  'schedule_cron',
  'threshold_basis',
  'threshold_currency',
  'threshold_value',
  'min_consolidate_usd',
  'active_run_id',
  'in_flight_sweeps',
  'automation_paused_at',
  'created_at',
  'updated_at',
].sort();

/** Consolidation rules, their triggers and the run and sweep reads, through the real API, Temporal, PostgreSQL and the Ethereum devnet. */
describe('Consolidation rules: validation, CRUD, manual and threshold triggers, run and sweep reads', () => {
  let app: TestApp;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  let other: TestOrganization;
  const taskQueue = `consolidation-rules-${randomUUID()}`;
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_SCAN_INTERVAL_SECONDS: '0.2', CHAIN_CONFIRMATIONS_ETHEREUM: '2' };
  const runWorkflows: string[] = [];

  before(async () => {
    app = await startTestApp({ config });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Consolidation');
    other = await createTestOrganization('Consolidation, other');
  });
  after(async () => {
    const { client } = await localTemporal();
    // Runs still going when the file ends are ended here.
    const runs = await app.deps.orm.em.fork().find(ConsolidationRun, {});
    runWorkflows.push(...runs.map((run) => consolidationRunFlow.workflowId({ runId: run.id })));
    await terminateWorkflows(client, [...CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]), ...runWorkflows]);
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });
  const mine = async (count: number) => assert.equal((await call('POST', '/v1/sandbox/chains/ethereum/blocks', { count })).status, 200);
  const expectError = (response: TestResponse, status: number, code: string, param?: string) => {
    assert.equal(response.status, status, response.text);
    assert.equal(response.body.error.code, code, response.text);
    if (param !== undefined) assert.equal(response.body.error.param, param, response.text);
  };

  async function vault(name: string, owner = org) {
    const created = await call('POST', '/v1/vaults', { name }, owner.secret);
    assert.equal(created.status, 201, created.text);
    return created.body.id as string;
  }
  async function wallet(vaultId: string, chain: string, owner = org) {
    const created = await call('POST', '/v1/wallets', { name: `${chain} wallet`, chain, vault_id: vaultId, wallet_type: 'hot' }, owner.secret);
    assert.equal(created.status, 201, created.text);
    return { id: created.body.id as string, address: created.body.primary_address.address as string, addressId: created.body.primary_address.id as string };
  }
  /** Address book entries are written with the ORM: their routes come with another change. */
  async function addressBookEntry(owner: TestOrganization, chain: 'ethereum' | 'tron', address: string, usableAt = new Date()) {
    const em = app.deps.orm.em.fork();
    const entry = em.create(AddressBookEntry, {
      organization: em.getReference(Organization, owner.organizationId),
      environment: 'sandbox',
      chain,
      network: chain === 'ethereum' ? 'sepolia' : 'nile',
      address,
      label: `${chain} cold wallet`,
      // A sandbox entry's cooling period is 0 by default: usable at once.
      usableAt,
    });
    await em.flush();
    return entry.id;
  }

  let source: string;
  let destination: string;
  let sourceWallets: { id: string; address: string; addressId: string }[];
  let ethBook: string;
  let tronBook: string;
  let otherBook: string;
  let otherVault: string;
  let ethStation: string;
  let tronStation: string;
  let otherStation: string;
  /** A valid body to vary one field at a time. */
  let base: Record<string, unknown>;

  before(async () => {
    source = await vault('Deposits');
    destination = await vault('Treasury');
    sourceWallets = [await wallet(source, 'ethereum'), await wallet(source, 'ethereum')];
    await wallet(destination, 'ethereum');
    ethBook = await addressBookEntry(org, 'ethereum', '0x1111111111111111111111111111111111111111');
    tronBook = await addressBookEntry(org, 'tron', 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7');
    otherBook = await addressBookEntry(other, 'ethereum', '0x2222222222222222222222222222222222222222');
    otherVault = await vault('Other treasury', other);
    await wallet(otherVault, 'ethereum', other);
    ethStation = (await call('POST', '/v1/gas-stations', { name: 'ETH gas', chain: 'ethereum', threshold: '0' })).body.id;
    tronStation = (await call('POST', '/v1/gas-stations', { name: 'TRX gas', chain: 'tron', threshold: '0' })).body.id;
    otherStation = (await call('POST', '/v1/gas-stations', { name: 'Other gas', chain: 'ethereum', threshold: '0' }, other.secret)).body.id;
    base = { vault_id: source, chain: 'ethereum', destination_type: 'vault', destination_vault_id: destination, trigger_type: 'manual', gas_source: 'wallet' };
  });

  let manualRule: any;

  it('creates a rule with the defaults: the chain\'s native coin and every token with zero minimums, exactly the specified fields', async () => {
    const created = await call('POST', '/v1/consolidation/rules', { ...base, network: 'mainnet' });
    assert.equal(created.status, 201, created.text);
    manualRule = created.body;
    assert.deepEqual(Object.keys(manualRule).sort(), RULE_FIELDS);
    assert.equal(manualRule.object, 'consolidation_rule');
    assert.equal(manualRule.org_id, org.organizationId);
    assert.equal(manualRule.vault_id, source);
    assert.equal(manualRule.network, 'sepolia', 'the key decides the network');
    assert.equal(manualRule.enabled, true);
    assert.equal(manualRule.destination_vault_id, destination);
    assert.equal(manualRule.destination_address_book_id, null);
    assert.equal(manualRule.gas_station_id, null);
    assert.equal(manualRule.schedule_cron, null);
    assert.equal(manualRule.threshold_value, null);
    assert.equal(manualRule.min_consolidate_usd, null);
    assert.equal(manualRule.active_run_id, null);
    assert.equal(manualRule.in_flight_sweeps, 0);
    assert.deepEqual(manualRule.assets, [
      { symbol: 'ETH', contract_address: null, is_native: true, min_amount_to_move: '0', min_balance_to_leave: '0' },
      { symbol: 'USDC', contract_address: DEVNET_TOKENS.ethereum.USDC_ETH, is_native: false, min_amount_to_move: '0', min_balance_to_leave: '0' },
      { symbol: 'USDT', contract_address: DEVNET_TOKENS.ethereum.USDT_ETH, is_native: false, min_amount_to_move: '0', min_balance_to_leave: '0' },
    ]);
    const stored = await app.deps.orm.em.fork().findOneOrFail(ConsolidationRule, { id: manualRule.id });
    assert.deepEqual(
      stored.assets.map((asset) => asset.asset_id),
      ['ETH', 'USDC_ETH', 'USDT_ETH'],
      'the catalogue asset id is stored beside each asset',
    );
  });

  it('creates rules with every destination, gas source and trigger, and resolves assets by symbol, id or contract', async () => {
    const full = await call('POST', '/v1/consolidation/rules', {
      vault_id: source,
      chain: 'ethereum',
      destination_type: 'address_book',
      destination_address_book_id: ethBook,
      trigger_type: 'threshold',
      threshold_basis: 'aggregate',
      threshold_currency: 'usd',
      threshold_value: '1000000.50',
      gas_source: 'customer_gas_station',
      gas_station_id: ethStation,
      enabled: false,
      min_consolidate_usd: '10.0',
      assets: [
        { symbol: 'USDC', min_amount_to_move: '5.5', min_balance_to_leave: '1' },
        { contract_address: DEVNET_TOKENS.ethereum.USDT_ETH.toLowerCase() },
        { is_native: true, min_balance_to_leave: '0.010' },
      ],
    });
    assert.equal(full.status, 201, full.text);
    assert.equal(full.body.destination_address_book_id, ethBook);
    assert.equal(full.body.gas_station_id, ethStation);
    assert.equal(full.body.enabled, false);
    assert.equal(full.body.threshold_value, '1000000.5');
    assert.equal(full.body.min_consolidate_usd, '10');
    assert.deepEqual(full.body.assets, [
      { symbol: 'USDC', contract_address: DEVNET_TOKENS.ethereum.USDC_ETH, is_native: false, min_amount_to_move: '5.5', min_balance_to_leave: '1' },
      { symbol: 'USDT', contract_address: DEVNET_TOKENS.ethereum.USDT_ETH, is_native: false, min_amount_to_move: '0', min_balance_to_leave: '0' },
      { symbol: 'ETH', contract_address: null, is_native: true, min_amount_to_move: '0', min_balance_to_leave: '0.01' },
    ]);

    const tron = await call('POST', '/v1/consolidation/rules', {
      vault_id: source,
      chain: 'tron',
      destination_type: 'address_book',
      destination_address_book_id: tronBook,
      trigger_type: 'scheduled',
      schedule_cron: ' 0  */6 * * MON-FRI ',
      gas_source: 'hedge_paymaster',
      assets: [{ symbol: 'USDT_TRX' }],
    });
    assert.equal(tron.status, 201, tron.text);
    assert.equal(tron.body.schedule_cron, '0 */6 * * MON-FRI', 'stored with single spaces');
    assert.equal(tron.body.network, 'nile');
    assert.deepEqual(tron.body.assets, [{ symbol: 'USDT', contract_address: DEVNET_TOKENS.tron.USDT_TRX, is_native: false, min_amount_to_move: '0', min_balance_to_leave: '0' }]);
  });

  it('refuses every invalid field and combination, naming the field', async () => {
    const create = (changes: Record<string, unknown>, omit: string[] = []) =>
      call('POST', '/v1/consolidation/rules', Object.fromEntries(Object.entries({ ...base, ...changes }).filter(([name]) => !omit.includes(name))));
    const cases: [string, Record<string, unknown>, string[], number, string, string][] = [
      ['vault of another organization', { vault_id: otherVault }, [], 404, 'resource_missing', 'vault_id'],
      ['vault_id not a uuid', { vault_id: 'vault' }, [], 400, 'validation_failed', 'vault_id'],
      ['missing vault_id', {}, ['vault_id'], 400, 'validation_failed', 'vault_id'],
      ['unknown chain', { chain: 'dogecoin' }, [], 400, 'validation_failed', 'chain'],
      ['Bitcoin', { chain: 'bitcoin' }, [], 400, 'consolidation_unsupported_chain', 'chain'],
      ['unknown destination_type', { destination_type: 'exchange' }, [], 400, 'validation_failed', 'destination_type'],
      ['unknown trigger_type', { trigger_type: 'daily' }, [], 400, 'validation_failed', 'trigger_type'],
      ['unknown gas_source', { gas_source: 'faucet' }, [], 400, 'validation_failed', 'gas_source'],
      ['unknown field', { colour: 'blue' }, [], 400, 'validation_failed', 'colour'],
      ['vault destination without destination_vault_id', {}, ['destination_vault_id'], 400, 'validation_failed', 'destination_vault_id'],
      ['vault destination into itself', { destination_vault_id: source }, [], 400, 'validation_failed', 'destination_vault_id'],
      ['vault destination of another organization', { destination_vault_id: otherVault }, [], 404, 'resource_missing', 'destination_vault_id'],
      ['vault destination without a wallet on the chain', { chain: 'tron' }, [], 400, 'validation_failed', 'destination_vault_id'],
      ['address book id with a vault destination', { destination_address_book_id: ethBook }, [], 400, 'validation_failed', 'destination_address_book_id'],
      ['address book destination without an entry', { destination_type: 'address_book' }, ['destination_vault_id'], 400, 'validation_failed', 'destination_address_book_id'],
      ['address book entry of another chain', { destination_type: 'address_book', destination_address_book_id: tronBook }, ['destination_vault_id'], 400, 'validation_failed', 'destination_address_book_id'],
      ['address book entry of another organization', { destination_type: 'address_book', destination_address_book_id: otherBook }, ['destination_vault_id'], 404, 'resource_missing', 'destination_address_book_id'],
      ['vault id with an address book destination', { destination_type: 'address_book', destination_address_book_id: ethBook }, [], 400, 'validation_failed', 'destination_vault_id'],
      ['gas station source without a station', { gas_source: 'customer_gas_station' }, [], 400, 'validation_failed', 'gas_station_id'],
      ['gas station of another chain', { gas_source: 'customer_gas_station', gas_station_id: tronStation }, [], 400, 'validation_failed', 'gas_station_id'],
      ['gas station of another organization', { gas_source: 'customer_gas_station', gas_station_id: otherStation }, [], 404, 'resource_missing', 'gas_station_id'],
      ['gas station with another gas source', { gas_station_id: ethStation }, [], 400, 'validation_failed', 'gas_station_id'],
      ['scheduled without schedule_cron', { trigger_type: 'scheduled' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron over 100 characters', { trigger_type: 'scheduled', schedule_cron: `0 0 * * ${'1,'.repeat(50)}1` }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron with 4 fields', { trigger_type: 'scheduled', schedule_cron: '0 * * *' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron with seconds', { trigger_type: 'scheduled', schedule_cron: '0 0 * * * *' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron minute 60', { trigger_type: 'scheduled', schedule_cron: '60 * * * *' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron step 0', { trigger_type: 'scheduled', schedule_cron: '*/0 * * * *' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron backwards range', { trigger_type: 'scheduled', schedule_cron: '0 5-1 * * *' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron month 13', { trigger_type: 'scheduled', schedule_cron: '0 0 1 13 *' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron macro', { trigger_type: 'scheduled', schedule_cron: '@hourly' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['schedule_cron with a manual trigger', { schedule_cron: '0 * * * *' }, [], 400, 'validation_failed', 'schedule_cron'],
      ['threshold without basis', { trigger_type: 'threshold', threshold_currency: 'usd', threshold_value: '10' }, [], 400, 'validation_failed', 'threshold_basis'],
      ['threshold without currency', { trigger_type: 'threshold', threshold_basis: 'aggregate', threshold_value: '10' }, [], 400, 'validation_failed', 'threshold_currency'],
      ['threshold without value', { trigger_type: 'threshold', threshold_basis: 'aggregate', threshold_currency: 'usd' }, [], 400, 'validation_failed', 'threshold_value'],
      ['threshold value zero', { trigger_type: 'threshold', threshold_basis: 'aggregate', threshold_currency: 'usd', threshold_value: '0.00' }, [], 400, 'validation_failed', 'threshold_value'],
      ['threshold value negative', { trigger_type: 'threshold', threshold_basis: 'aggregate', threshold_currency: 'usd', threshold_value: '-5' }, [], 400, 'validation_failed', 'threshold_value'],
      ['threshold value a number', { trigger_type: 'threshold', threshold_basis: 'aggregate', threshold_currency: 'usd', threshold_value: 5 }, [], 400, 'validation_failed', 'threshold_value'],
      ['unknown threshold basis', { trigger_type: 'threshold', threshold_basis: 'sum', threshold_currency: 'usd', threshold_value: '5' }, [], 400, 'validation_failed', 'threshold_basis'],
      ['threshold fields with a manual trigger', { threshold_value: '5' }, [], 400, 'validation_failed', 'threshold_value'],
      ['negative min_consolidate_usd', { min_consolidate_usd: '-1' }, [], 400, 'validation_failed', 'min_consolidate_usd'],
      ['empty assets', { assets: [] }, [], 400, 'validation_failed', 'assets'],
      ['asset of another chain', { assets: [{ symbol: 'TRX' }] }, [], 400, 'validation_failed', 'assets.0.symbol'],
      ['unknown asset', { assets: [{ symbol: 'DOGE' }] }, [], 400, 'validation_failed', 'assets.0.symbol'],
      ['asset naming nothing', { assets: [{ min_amount_to_move: '1' }] }, [], 400, 'validation_failed', 'assets.0.symbol'],
      ['unknown contract', { assets: [{ contract_address: '0x3333333333333333333333333333333333333333' }] }, [], 400, 'validation_failed', 'assets.0.contract_address'],
      ['symbol and another contract', { assets: [{ symbol: 'USDC', contract_address: DEVNET_TOKENS.ethereum.USDT_ETH }] }, [], 400, 'validation_failed', 'assets.0.contract_address'],
      ['native with a contract', { assets: [{ is_native: true, contract_address: DEVNET_TOKENS.ethereum.USDT_ETH }] }, [], 400, 'validation_failed', 'assets.0.contract_address'],
      ['native with a token symbol', { assets: [{ is_native: true, symbol: 'USDC' }] }, [], 400, 'validation_failed', 'assets.0.symbol'],
      ['the native coin marked not native', { assets: [{ symbol: 'ETH', is_native: false }] }, [], 400, 'validation_failed', 'assets.0.is_native'],
      ['more decimals than the asset', { assets: [{ symbol: 'USDC', min_amount_to_move: '0.0000001' }] }, [], 400, 'validation_failed', 'assets.0.min_amount_to_move'],
      ['negative minimum', { assets: [{ symbol: 'USDC', min_balance_to_leave: '-1' }] }, [], 400, 'validation_failed', 'assets.0.min_balance_to_leave'],
      ['the same asset twice', { assets: [{ symbol: 'USDC' }, { symbol: 'USDC_ETH' }] }, [], 400, 'validation_failed', 'assets.1'],
    ];
    for (const [what, changes, omit, status, code, param] of cases) {
      const response = await create(changes, omit);
      assert.equal(response.status, status, `${what}: ${response.text}`);
      assert.equal(response.body.error.code, code, `${what}: ${response.text}`);
      if (param) assert.equal(response.body.error.param, param, `${what}: ${response.text}`);
    }
    const rules = await app.deps.orm.em.fork().count(ConsolidationRule, { organization: org.organizationId });
    assert.equal(rules, 3, 'nothing refused was stored');
  });

  it('lists, reads, updates with the combination checks on the result, and deletes', async () => {
    const listed = await call('GET', '/v1/consolidation/rules?limit=2');
    assert.equal(listed.status, 200);
    assert.equal(listed.body.data.length, 2);
    assert.equal(listed.body.has_more, true);
    const rest = await call('GET', `/v1/consolidation/rules?limit=2&cursor=${listed.body.next_cursor}`);
    assert.deepEqual(
      [...listed.body.data, ...rest.body.data].map((rule: { id: string }) => rule.id).at(-1),
      manualRule.id,
      'newest first, the first rule last',
    );
    assert.equal((await call('GET', '/v1/consolidation/rules?chain=tron')).body.data.length, 1);
    assert.deepEqual((await call('GET', `/v1/consolidation/rules/${manualRule.id}`)).body, manualRule);

    const toThreshold = await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { trigger_type: 'threshold' });
    expectError(toThreshold, 400, 'validation_failed', 'threshold_basis');
    const threshold = await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, {
      trigger_type: 'threshold',
      threshold_basis: 'per_address',
      threshold_currency: 'token',
      threshold_value: '100',
      min_consolidate_usd: '1',
      assets: [{ is_native: true, min_amount_to_move: '0.5' }],
    });
    assert.equal(threshold.status, 200, threshold.text);
    assert.equal(threshold.body.threshold_basis, 'per_address');
    assert.equal(threshold.body.min_consolidate_usd, '1');
    assert.deepEqual(threshold.body.assets, [{ symbol: 'ETH', contract_address: null, is_native: true, min_amount_to_move: '0.5', min_balance_to_leave: '0' }]);
    assert.notEqual(threshold.body.updated_at, manualRule.updated_at);

    expectError(await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { destination_type: 'address_book' }), 400, 'validation_failed', 'destination_address_book_id');
    expectError(await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { destination_vault_id: null }), 400, 'validation_failed', 'destination_vault_id');
    expectError(await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { vault_id: destination }), 400, 'validation_failed');
    expectError(await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { chain: 'tron' }), 400, 'validation_failed');
    expectError(await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { threshold_value: null }), 400, 'validation_failed', 'threshold_value');
    expectError(await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { gas_station_id: otherStation, gas_source: 'customer_gas_station' }), 404, 'resource_missing', 'gas_station_id');

    const toBook = await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { destination_type: 'address_book', destination_address_book_id: ethBook, trigger_type: 'manual', min_consolidate_usd: null });
    assert.equal(toBook.status, 200, toBook.text);
    assert.equal(toBook.body.destination_vault_id, null, 'a destination that no longer applies is cleared');
    assert.equal(toBook.body.threshold_basis, null, 'threshold fields are cleared with a manual trigger');
    assert.equal(toBook.body.threshold_currency, null);
    assert.equal(toBook.body.threshold_value, null);
    assert.equal(toBook.body.min_consolidate_usd, null);

    const victim = (await call('POST', '/v1/consolidation/rules', base)).body;
    const deleted = await call('DELETE', `/v1/consolidation/rules/${victim.id}`);
    assert.equal(deleted.status, 200, deleted.text);
    expectError(await call('GET', `/v1/consolidation/rules/${victim.id}`), 404, 'resource_missing');
    expectError(await call('PATCH', `/v1/consolidation/rules/${victim.id}`, { enabled: false }), 404, 'resource_missing');
    expectError(await call('POST', `/v1/consolidation/rules/${victim.id}/runs`), 404, 'resource_missing');
    expectError(await call('DELETE', `/v1/consolidation/rules/${victim.id}`), 404, 'resource_missing');
    assert.ok(!(await call('GET', '/v1/consolidation/rules?limit=100')).body.data.some((rule: { id: string }) => rule.id === victim.id));
  });

  it('keeps rules to their organization, environment and scopes', async () => {
    expectError(await call('GET', `/v1/consolidation/rules/${manualRule.id}`, undefined, other.secret), 404, 'resource_missing');
    const live = (await org.key(['*'], 'live')).secret;
    expectError(await call('GET', `/v1/consolidation/rules/${manualRule.id}`, undefined, live), 404, 'resource_missing');
    expectError(await call('POST', '/v1/consolidation/rules', base, live), 404, 'resource_missing', 'vault_id');
    const reader = (await org.key(['consolidation:read'])).secret;
    assert.equal((await call('GET', `/v1/consolidation/rules/${manualRule.id}`, undefined, reader)).status, 200);
    assert.equal((await call('GET', '/v1/consolidation/runs', undefined, reader)).status, 200);
    expectError(await call('POST', '/v1/consolidation/rules', base, reader), 403, 'insufficient_scope');
    expectError(await call('POST', `/v1/consolidation/rules/${manualRule.id}/runs`, undefined, reader), 403, 'insufficient_scope');
    const writer = (await org.key(['custody:read'])).secret;
    expectError(await call('GET', '/v1/consolidation/rules', undefined, writer), 403, 'insufficient_scope');

    // A rule moves a vault's funds: creating one, or changing where it sends them, needs transactions:write as well.
    const consolidationOnly = (await org.key(['consolidation:write'])).secret;
    const needsTransactions = (response: TestResponse) => {
      expectError(response, 403, 'insufficient_scope');
      assert.equal(response.body.error.details.required_scope, 'transactions:write');
    };
    needsTransactions(await call('POST', '/v1/consolidation/rules', base, consolidationOnly));
    needsTransactions(await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { destination_type: 'address_book', destination_address_book_id: ethBook }, consolidationOnly));
    needsTransactions(await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { destination_vault_id: destination }, consolidationOnly));
    const enabled = await call('PATCH', `/v1/consolidation/rules/${manualRule.id}`, { enabled: true }, consolidationOnly);
    assert.equal(enabled.status, 200, enabled.text);
    const mover = (await org.key(['consolidation:write', 'transactions:write'])).secret;
    const created = await call('POST', '/v1/consolidation/rules', base, mover);
    assert.equal(created.status, 201, created.text);
    assert.equal((await call('DELETE', `/v1/consolidation/rules/${created.body.id}`)).status, 200);
  });

  it('a live rule valued in USD, with live having no price source, is 503 price_source_unavailable and changes nothing; in token units it is made', async () => {
    const live = (await org.key(['*'], 'live')).secret;
    const liveVault = async (name: string) => {
      const created = await call('POST', '/v1/vaults', { name }, live);
      assert.equal(created.status, 201, created.text);
      const wallet = await call('POST', '/v1/wallets', { name: `${name} ethereum`, chain: 'ethereum', vault_id: created.body.id, wallet_type: 'hot' }, live);
      assert.equal(wallet.status, 201, wallet.text);
      return created.body.id as string;
    };
    const liveBase = { ...base, vault_id: await liveVault('live source'), destination_vault_id: await liveVault('live destination'), assets: [{ is_native: true }] };
    const byUsd = { ...liveBase, trigger_type: 'threshold', threshold_basis: 'aggregate', threshold_currency: 'usd', threshold_value: '1000' };
    const refused = await call('POST', '/v1/consolidation/rules', byUsd, live);
    expectError(refused, 503, 'price_source_unavailable');
    assert.match(refused.body.error.message, /CHAIN_NODE_ETHEREUM_LIVE and PRICE_FEEDS_LIVE/);
    expectError(await call('POST', '/v1/consolidation/rules', { ...liveBase, min_consolidate_usd: '50' }, live), 503, 'price_source_unavailable');
    assert.equal((await call('GET', '/v1/consolidation/rules?limit=100', undefined, live)).body.data.length, 0, 'no live rule was made');

    const inTokens = await call('POST', '/v1/consolidation/rules', { ...byUsd, threshold_currency: 'token', threshold_value: '2' }, live);
    assert.equal(inTokens.status, 201, inTokens.text);
    expectError(await call('PATCH', `/v1/consolidation/rules/${inTokens.body.id}`, { threshold_currency: 'usd' }, live), 503, 'price_source_unavailable');
    const unchanged = await call('GET', `/v1/consolidation/rules/${inTokens.body.id}`, undefined, live);
    assert.equal(unchanged.body.threshold_currency, 'token');
    assert.equal((await call('DELETE', `/v1/consolidation/rules/${inTokens.body.id}`, undefined, live)).status, 200);
    // The sandbox has its price table: the same rule is made there.
    const sandboxRule = await call('POST', '/v1/consolidation/rules', { ...base, trigger_type: 'threshold', threshold_basis: 'aggregate', threshold_currency: 'usd', threshold_value: '1000' });
    assert.equal(sandboxRule.status, 201, sandboxRule.text);
    assert.equal((await call('DELETE', `/v1/consolidation/rules/${sandboxRule.body.id}`)).status, 200);
  });

  let manualRun: any;

  it('runs a rule manually: one run at a time, a trigger during it recorded on it', async () => {
    const member = await org.key(['consolidation:write', 'consolidation:read']);
    const responses = await releaseTogether(manualRule.id, 2, () =>
      Promise.all([call('POST', `/v1/consolidation/rules/${manualRule.id}/runs`, undefined, member.secret), call('POST', `/v1/consolidation/rules/${manualRule.id}/runs`)]),
    );
    const first = responses.find((response) => response.status === 202);
    const second = responses.find((response) => response.status === 200);
    assert.ok(first && second, responses.map((response) => `${response.status} ${response.text}`).join('\n'));
    manualRun = first.body;
    const [firstKey, secondKey] = first === responses[0] ? [member.id, org.apiKeyId] : [org.apiKeyId, member.id];
    assert.equal(manualRun.object, 'consolidation_run');
    assert.equal(manualRun.status, 'pending');
    assert.equal(manualRun.trigger_source, 'manual');
    assert.equal(manualRun.initiated_by_user_id, firstKey, 'a key without a member: the key');
    assert.equal(manualRun.rule_id, manualRule.id);
    assert.equal(manualRun.vault_id, source);
    assert.equal(manualRun.recorded_trigger_count, 0);
    assert.equal(manualRun.last_recorded_trigger, null);
    assert.deepEqual(manualRun.per_asset_totals, []);
    assert.deepEqual(manualRun.fees, { total_usd: '0', breakdown: [] });
    assert.equal(manualRun.addresses_scanned, 0);

    assert.equal(second.body.id, manualRun.id, 'the run in progress');
    assert.equal(second.body.recorded_trigger_count, 1);
    assert.equal(second.body.last_recorded_trigger.source, 'manual');
    assert.equal(second.body.last_recorded_trigger.detail, secondKey);

    // The run workflow finds nothing to sweep (the vault holds nothing yet) and frees the rule.
    const completed = await eventually(async () => {
      const runs = (await call('GET', `/v1/consolidation/runs?rule_id=${manualRule.id}&status=completed`)).body.data;
      return runs.length ? runs : undefined;
    }, 'the manual run completed');
    assert.deepEqual(completed.map((run: { id: string }) => run.id), [manualRun.id]);
    assert.equal((await call('GET', `/v1/consolidation/runs?rule_id=${manualRule.id}`)).body.data.length, 1, 'one run for two triggers');
    assert.equal((await call('GET', `/v1/consolidation/runs?rule_id=${manualRule.id}&status=failed`)).body.data.length, 0);
    assert.equal((await call('GET', `/v1/consolidation/rules/${manualRule.id}`)).body.active_run_id, null);
    assert.equal((await call('GET', `/v1/consolidation/runs/${manualRun.id}`)).body.recorded_trigger_count, 1);
    expectError(await call('GET', `/v1/consolidation/runs/${manualRun.id}`, undefined, other.secret), 404, 'resource_missing');
    expectError(await call('GET', '/v1/consolidation/runs?status=done'), 400, 'validation_failed', 'status');
  });

  it('refuses a disabled rule\'s manual run, and enabling it again allows it', async () => {
    const disabled = (await call('POST', '/v1/consolidation/rules', { ...base, enabled: false })).body;
    expectError(await call('POST', `/v1/consolidation/rules/${disabled.id}/runs`), 409, 'consolidation_rule_disabled');
    assert.equal((await call('PATCH', `/v1/consolidation/rules/${disabled.id}`, { enabled: true })).status, 200);
    assert.equal((await call('POST', `/v1/consolidation/rules/${disabled.id}/runs`)).status, 202);
  });

  let thresholdRule: any;
  const deposits: string[] = [];

  it('a deposit taking the vault over a USD threshold triggers one run (source threshold); rules it does not reach, disabled or deleted, none', async () => {
    const create = (changes: Record<string, unknown>) => call('POST', '/v1/consolidation/rules', { ...base, trigger_type: 'threshold', threshold_basis: 'aggregate', ...changes });
    // Triggered runs find nothing to move (min_amount_to_move above what arrives): the deposits stay for the next tests.
    thresholdRule = (await create({ threshold_currency: 'usd', threshold_value: '4000', assets: [{ is_native: true, min_amount_to_move: '100' }] })).body;
    const perAddress = (await create({ threshold_basis: 'per_address', threshold_currency: 'token', threshold_value: '2' })).body;
    const tokensOnly = (await create({ threshold_currency: 'usd', threshold_value: '1', assets: [{ symbol: 'USDC' }] })).body;
    const disabled = (await create({ threshold_currency: 'usd', threshold_value: '1', enabled: false })).body;
    const deleted = (await create({ threshold_currency: 'usd', threshold_value: '1' })).body;
    assert.equal((await call('DELETE', `/v1/consolidation/rules/${deleted.id}`)).status, 200);

    // 1.5 ETH at the sandbox's 3000 USD: 4500 USD over both wallets, 1.5 ETH at most per wallet.
    for (const [index, amount] of ['1', '0.5'].entries()) {
      const deposit = await call('POST', '/v1/sandbox/deposits', { chain: 'ethereum', address: sourceWallets[index]!.address, asset: 'ETH', amount });
      assert.equal(deposit.status, 201, deposit.text);
      deposits.push(deposit.body.deposit.id);
    }
    await mine(2);
    const run = await eventually(async () => {
      const runs = (await call('GET', `/v1/consolidation/runs?rule_id=${thresholdRule.id}`)).body.data;
      return runs.length ? runs : undefined;
    }, 'the threshold run');
    assert.equal(run.length, 1, 'one run');
    assert.equal(run[0].trigger_source, 'threshold');
    assert.equal(run[0].initiated_by_user_id, null);
    for (const rule of [perAddress, tokensOnly, disabled, deleted]) {
      assert.equal((await call('GET', `/v1/consolidation/runs?rule_id=${rule.id}`)).body.data.length, 0, `no run of ${rule.id}`);
    }
  });

  it('two deposits racing over a threshold still make one run, the other recorded on it', async () => {
    const rule = (
      await call('POST', '/v1/consolidation/rules', {
        ...base,
        trigger_type: 'threshold',
        threshold_basis: 'per_address',
        threshold_currency: 'token',
        threshold_value: '0.5',
        assets: [{ is_native: true, min_amount_to_move: '100' }],
      })
    ).body;
    const rows = await app.deps.orm.em.fork().find(IncomingTransfer, { id: { $in: deposits } });
    assert.equal(rows.length, 2);
    assert.ok(rows.every((row) => row.status === 'confirmed'));
    // Each deposit's confirmation in its own transaction, both at once.
    await releaseTogether(rule.id, 2, () =>
      Promise.all(rows.map((row) => app.deps.starter.transaction(app.deps.orm.em.fork(), (em) => triggerThresholdRules(em, app.deps.config, [row])))),
    );
    const runs = (await call('GET', `/v1/consolidation/runs?rule_id=${rule.id}`)).body.data;
    assert.equal(runs.length, 1);
    assert.equal(runs[0].trigger_source, 'threshold');
    assert.equal(runs[0].recorded_trigger_count, 1);
    assert.equal(runs[0].last_recorded_trigger.source, 'threshold');
    assert.ok(deposits.includes(runs[0].last_recorded_trigger.detail), 'the recorded trigger names its deposit');

    await eventually(async () => ((await call('GET', `/v1/consolidation/rules/${rule.id}`)).body.active_run_id === null ? true : undefined), 'the run finished');
    assert.equal((await call('PATCH', `/v1/consolidation/rules/${rule.id}`, { enabled: false })).status, 200);
    await app.deps.starter.transaction(app.deps.orm.em.fork(), (tx) => triggerThresholdRules(tx, app.deps.config, rows));
    assert.equal((await call('GET', `/v1/consolidation/runs?rule_id=${rule.id}`)).body.data.length, 1, 'a disabled rule is not triggered');
  });

  it('shows a run\'s sweeps, its per-asset totals, its fees in USD and the rule\'s in-flight sweeps', async () => {
    const em = app.deps.orm.em.fork();
    // A real send (with its fee) from the funded wallet, to stand for a sweep's transaction.
    const send = await call('POST', '/v1/transactions', { wallet_id: sourceWallets[0]!.id, to_address: '0x1111111111111111111111111111111111111111', amount: '0.1', asset: 'ETH' });
    assert.equal(send.status, 201, send.text);
    const sent = await eventually(
      async () => {
        const transaction = (await call('GET', `/v1/transactions/${send.body.id}`)).body;
        if (transaction.status === 'confirmed') return transaction;
        if (transaction.status === 'broadcast' || transaction.status === 'confirming') await mine(1);
        return undefined;
      },
      'the send confirmed',
      60_000,
      500,
    );
    const run = await em.findOneOrFail(ConsolidationRun, { id: manualRun.id }, { populate: ['rule'] });
    const sweep = (status: 'confirmed' | 'submitted' | 'failed', assetId: string, amount: string, addressIndex: number, transaction: string | null, failureReason: string | null = null) =>
      em.create(ConsolidationSweep, {
        organization: run.organization,
        environment: run.environment,
        rule: run.rule,
        run,
        chain: 'ethereum',
        network: 'sepolia',
        wallet: sourceWallets[addressIndex]!.id,
        sourceAddress: em.getReference(Address, sourceWallets[addressIndex]!.addressId),
        destinationAddress: '0x1111111111111111111111111111111111111111',
        assetId,
        amount,
        gasSource: run.rule.gasSource,
        status,
        failureReason,
        transaction: transaction ? em.getReference(OutgoingTransaction, transaction) : null,
      });
    const confirmed = sweep('confirmed', 'ETH', '100000000000000000', 0, sent.id);
    sweep('confirmed', 'ETH', '250000000000000000', 1, null);
    sweep('submitted', 'USDC_ETH', '1', 1, null);
    sweep('failed', 'USDT_ETH', '5000000', 0, null, 'insufficient_gas');
    await em.flush();

    const read = (await call('GET', `/v1/consolidation/runs/${manualRun.id}`)).body;
    assert.deepEqual(read.per_asset_totals, [{ asset_address: null, asset_symbol: 'ETH', amount_swept: '0.35', sweep_count: 2 }]);
    const stored = await em.findOneOrFail(OutgoingTransaction, { id: sent.id }, { refresh: true });
    assert.ok(stored.fee && BigInt(stored.fee) > 0n, 'the confirmed send has its fee');
    const feeEth = toDisplay(stored.fee, 18);
    assert.deepEqual(read.fees, {
      total_usd: new Money(feeEth).times(3000).toFixed(),
      breakdown: [{ kind: 'network_fee', currency: 'ETH', amount: feeEth, amount_usd: new Money(feeEth).times(3000).toFixed() }],
    });

    const page = await call('GET', `/v1/consolidation/runs/${manualRun.id}/sweeps?limit=3`);
    assert.equal(page.status, 200, page.text);
    assert.equal(page.body.data.length, 3);
    assert.equal(page.body.has_more, true);
    const last = await call('GET', `/v1/consolidation/runs/${manualRun.id}/sweeps?cursor=${page.body.next_cursor}`);
    assert.equal(last.body.data.length, 1);
    const shown = (await call('GET', `/v1/consolidation/sweeps/${confirmed.id}`)).body;
    assert.deepEqual(shown, {
      id: confirmed.id,
      object: 'consolidation_sweep',
      org_id: org.organizationId,
      rule_id: manualRule.id,
      run_id: manualRun.id,
      chain: 'ethereum',
      network: 'sepolia',
      source_address_id: sourceWallets[0]!.addressId,
      destination_address: '0x1111111111111111111111111111111111111111',
      asset_address: null,
      asset_symbol: 'ETH',
      is_native: true,
      amount: '0.1',
      gas_source: run.rule.gasSource,
      status: 'confirmed',
      failure_reason: null,
      transaction_id: sent.id,
      tx_hash: sent.tx_hash,
      created_at: shown.created_at,
      updated_at: shown.updated_at,
    });
    const all = [...page.body.data, ...last.body.data];
    const token = all.find((candidate: { asset_symbol: string }) => candidate.asset_symbol === 'USDT');
    assert.equal(token.asset_address, null, "the rule's assets no longer list USDT: its contract is not recorded");
    assert.equal(token.failure_reason, 'insufficient_gas');
    assert.equal(token.amount, '5');
    assert.equal((await call('GET', `/v1/consolidation/rules/${manualRule.id}`)).body.in_flight_sweeps, 1);
    expectError(await call('GET', `/v1/consolidation/sweeps/${confirmed.id}`, undefined, other.secret), 404, 'resource_missing');
    expectError(await call('GET', `/v1/consolidation/runs/${manualRun.id}/sweeps`, undefined, other.secret), 404, 'resource_missing');
  });

  it('does not sweep to an address book entry before its usable_at: a manual run is refused, a triggered run fails with destination_not_usable', async () => {
    const usableAt = new Date(Date.now() + 24 * 3_600_000);
    const waiting = await addressBookEntry(org, 'ethereum', '0x3333333333333333333333333333333333333333', usableAt);
    // A rule may name an entry in its cooling period: it sweeps to it once the entry is usable.
    const created = await call('POST', '/v1/consolidation/rules', { vault_id: source, chain: 'ethereum', destination_type: 'address_book', destination_address_book_id: waiting, trigger_type: 'manual', gas_source: 'wallet' });
    assert.equal(created.status, 201, created.text);
    const rule = created.body;
    const refused = await call('POST', `/v1/consolidation/rules/${rule.id}/runs`);
    expectError(refused, 409, 'destination_not_usable');
    assert.deepEqual(refused.body.error.details, { address_book_entry_id: waiting, usable_at: usableAt.toISOString() });
    assert.equal((await call('GET', `/v1/consolidation/runs?rule_id=${rule.id}`)).body.data.length, 0, 'nothing started');

    // A trigger that does not pass through the API (a Schedule's) starts a run, which fails before planning any sweep.
    const triggered = await app.deps.starter.transaction(app.deps.orm.em.fork(), (tx) => triggerRun(tx, rule.id, { source: 'scheduled' }));
    assert.ok(triggered?.started);
    runWorkflows.push(consolidationRunFlow.workflowId({ runId: triggered.run.id }));
    const failed = await eventually(async () => {
      const run = (await call('GET', `/v1/consolidation/runs/${triggered.run.id}`)).body;
      return run.status === 'failed' ? run : undefined;
    }, 'the run failed');
    assert.equal(failed.failure_reason, 'destination_not_usable');
    assert.deepEqual((await call('GET', `/v1/consolidation/runs/${triggered.run.id}/sweeps`)).body.data, [], 'no sweep planned');
  });
});
