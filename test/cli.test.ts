import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { readBalances } from '../src/balances/service';
import { CHAIN_IDS } from '../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../src/chains/flows/devnet-blocks';
import { chainScanWorkflowId } from '../src/monitoring/flows/chain-scan';
import { PayoutRefund, PayoutTrip } from '../src/payouts/entities';
import { payoutRefundFlow } from '../src/payouts/flows/refund';
import { payoutTripFlow } from '../src/payouts/flows/trip';
import { createOrm } from '../src/db/orm';
import { PolicyAuditLog } from '../src/policies/entities';
import type { ServiceWorkers } from '../src/worker-setup';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from './support/app';
import { cli } from './support/cli';
import { localTemporal, testOrm } from './support/environment';
import { eventually } from './support/eventually';
import { mineRefund } from './support/payout-refunds';
import { terminateWorkflows } from './support/scanning';
import { createTestWorker } from './support/worker';

describe('CLI', function () {
  // Each command is a process of its own that loads the whole service: a busy 2-core machine took 103 s for one test.
  this.timeout(300_000);
  let app: TestApp;

  before(async () => {
    app = await startTestApp();
  });
  after(() => app?.close());

  it('bootstraps an empty database once: migrations, first organization, root key in a 0600 file', async () => {
    const orm = await testOrm();
    const name = `bootstrap_${Date.now()}`;
    await orm.em.getConnection().execute(`create database ${name}`);
    const url = new URL(process.env.DATABASE_URL!);
    url.pathname = `/${name}`;
    try {
      const migrated = await cli(['migrate'], url.toString());
      assert.ok(JSON.parse(migrated.stdout).applied.length >= 1);
      const keyFile = path.join(await mkdtemp(path.join(tmpdir(), 'cli-')), 'root-api-key');
      const first = await cli(['bootstrap', '--key-file', keyFile], url.toString());
      const secret = (await readFile(keyFile, 'utf8')).trim();
      assert.match(secret, /^sk_test_[0-9A-Za-z]{32}$/);
      assert.ok(first.stdout.includes(secret), 'printed once on the first start');
      assert.equal((await stat(keyFile)).mode & 0o777, 0o600);
      // The first start says who the root key acts for and how approvers who may vote are added.
      assert.match(first.stdout, /The root key acts for member [0-9a-f-]{36} \(Owner, org_role owner\)/);
      assert.match(first.stdout, /npm run cli -- member:create --org [0-9a-f-]{36} --name NAME --email EMAIL --org-role approver/);
      assert.match(first.stdout, /npm run cli -- key:create --org [0-9a-f-]{36} .*--user-id MEMBER_ID/);
      assert.match(first.stdout, /npm run cli -- org:configure --org [0-9a-f-]{36} --policy-activation-approvals N/);
      const second = await cli(['bootstrap', '--key-file', keyFile], url.toString());
      assert.equal(second.stdout, '', 'nothing secret on later starts');

      // A root key made before root keys acted for a member gets its owner (here the one of the owner's email) at the next start, once.
      const orm = await createOrm(url.toString(), 1);
      try {
        const connection = orm.em.getConnection();
        await connection.execute(`update api_keys set member_id = null where name = 'Root key'`);
        const third = await cli(['bootstrap', '--key-file', keyFile], url.toString());
        assert.match(third.stdout, /The root key acts for member [0-9a-f-]{36} \(Owner, org_role owner\)/);
        const [row] = await connection.execute<{ org_role: string; email: string }[]>(`select m.org_role, m.email from api_keys k join members m on m.id = k.member_id where k.name = 'Root key'`);
        assert.deepEqual(row, { org_role: 'owner', email: 'owner@localhost' });
        assert.equal((await cli(['bootstrap', '--key-file', keyFile], url.toString())).stdout, '');
      } finally {
        await orm.close();
      }
    } finally {
      await orm.em.getConnection().execute(`drop database ${name} with (force)`);
    }
  });

  it("without DATABASE_URL takes the settings of the npm start running with its DATA_DIR, and says the exact value to set when none runs", async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'cli-instance-'));
    const failure = (args: string[], env: Record<string, string | undefined>) =>
      cli(args, '', { DATABASE_URL: undefined, DATA_DIR: dataDir, ...env }).then(
        () => assert.fail('the command ran'),
        (error: { code: number; stderr: string }) => error,
      );
    const record = (pid: number, notRecorded: string[]) =>
      writeFile(
        path.join(dataDir, 'instance.json'),
        JSON.stringify({ pid, instance_id: 'test', api_url: 'http://127.0.0.1:1', database_url: process.env.DATABASE_URL, temporal: { address: '127.0.0.1:1', namespace: 'default', task_queue: null }, not_recorded: notRecorded }),
      );
    try {
      // Nothing recorded (no npm start with this DATA_DIR): the embedded cluster's URL, on the PG_PORT given.
      const none = await failure(['ledger:verify'], { PG_PORT: '54400' });
      assert.equal(none.code, 1);
      assert.match(none.stderr, /DATABASE_URL is not set, and no npm start has recorded its settings in .*: .*DATABASE_URL=postgresql:\/\/postgres@127\.0\.0\.1:54400\/custody\n$/);
      // Recorded by a start that has ended: the URL it ran with.
      const ended = spawn(process.execPath, ['-e', '']);
      await once(ended, 'exit');
      await record(ended.pid!, []);
      assert.ok((await failure(['ledger:verify'], {})).stderr.includes(`is not running: start it again, or set DATABASE_URL=${process.env.DATABASE_URL} (its PostgreSQL must run).`));
      // A running start (this process stands in for it) with a master key: the key is never recorded, and never replaced by the development one.
      await record(process.pid, ['MASTER_KEY']);
      assert.match((await failure(['ledger:verify'], { MASTER_KEY: undefined })).stderr, /runs with MASTER_KEY, which is never recorded .*: give the CLI the same/);
      const listed = await cli(['ledger:suspense'], '', { DATABASE_URL: undefined, DATA_DIR: dataDir });
      assert.equal(typeof JSON.parse(listed.stdout).count, 'number');
      assert.match(listed.stderr, new RegExp(`using the settings of the npm start that recorded .* \\(pid ${process.pid}\\)`));
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('creates organizations and scoped keys that the API accepts, and configures an organization', async () => {
    const org = JSON.parse((await cli(['org:create', '--name', 'CLI org'])).stdout);
    assert.match(org.api_key.secret, /^sk_test_/);
    const me = await app.request('GET', '/v1/api-keys/me', { key: org.api_key.secret });
    assert.equal(me.body.organization_id, org.organization_id);

    const member = JSON.parse(
      (await cli(['member:create', '--org', org.organization_id, '--name', 'Ops', '--email', 'ops@example.com', '--org-role', 'admin'])).stdout,
    );
    const key = JSON.parse(
      (await cli(['key:create', '--org', org.organization_id, '--name', 'Reader', '--scopes', 'cards:read,lightning:read', '--user-id', member.id]))
        .stdout,
    );
    const keyMe = await app.request('GET', '/v1/api-keys/me', { key: key.secret });
    assert.deepEqual(keyMe.body.scopes, ['cards:read', 'lightning:read']);
    assert.equal(keyMe.body.user_id, member.id);

    await assert.rejects(cli(['key:create', '--org', org.organization_id, '--name', 'x', '--scopes', 'everything']), /unknown scopes: everything/);

    const configured = JSON.parse((await cli(['org:configure', '--org', org.organization_id, '--policy-activation-approvals', '0'])).stdout);
    assert.equal(configured.policy_activation_required_approvals, 0);
    const policy = await app.request('POST', '/v1/policies', {
      key: org.api_key.secret,
      body: { name: 'At once', rules: [{ name: 'Allow all', action_type: 'allow', conditions: [{ field: 'amount', operator: 'greater_than_or_equal', value: '0' }] }] },
    });
    const activated = await app.request('POST', `/v1/policies/${policy.body.id}/activate`, { key: org.api_key.secret, body: {} });
    assert.deepEqual([activated.status, activated.body.status], [200, 'enforced'], 'no approvals configured: enforced at once');
    await assert.rejects(cli(['org:configure', '--org', org.organization_id, '--policy-activation-approvals', '21']), /whole number/);

    // New payees wait: the live cooling period unless --environment sandbox says otherwise.
    const live = JSON.parse((await cli(['org:configure', '--org', org.organization_id, '--address-book-cooling-hours', '48'])).stdout);
    assert.deepEqual(live.address_book_cooling_hours, { live: 48, sandbox: 0 });
    assert.equal(live.policy_activation_required_approvals, 0, 'other settings stay');
    const sandbox = JSON.parse((await cli(['org:configure', '--org', org.organization_id, '--address-book-cooling-hours', '6', '--environment', 'sandbox'])).stdout);
    assert.deepEqual(sandbox.address_book_cooling_hours, { live: 48, sandbox: 6 });
    const entry = await app.request('POST', '/v1/address-book', {
      key: org.api_key.secret,
      body: { chain: 'ethereum', address: '0x8617e340b3d01fa5f11f306f4090fd50e238070d', label: 'Cold storage' },
    });
    assert.equal(entry.status, 201, entry.text);
    assert.equal(Date.parse(entry.body.usable_at) - Date.parse(entry.body.created_at), 6 * 3_600_000);
    await assert.rejects(cli(['org:configure', '--org', org.organization_id, '--address-book-cooling-hours', '1.5']), /whole number/);
    await assert.rejects(cli(['org:configure', '--org', org.organization_id]), /--policy-activation-approvals or --address-book-cooling-hours is required/);
  });
});

/** `payout:resolve` against held trips made end to end: the API, a worker on the Temporal dev server, the devnet. */
describe('CLI payout:resolve', () => {
  let app: TestApp;
  let worker: ServiceWorkers | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  const taskQueue = `cli-payouts-${randomUUID()}`;
  // Underpayments beyond the margin are held (the default); the trip's workflow ends with the trip.
  const config = { TEMPORAL_TASK_QUEUE: taskQueue, DEVNET_BLOCK_INTERVAL_SECONDS: '3600', CHAIN_SCAN_INTERVAL_SECONDS: '0.2', CHAIN_CONFIRMATIONS_BITCOIN: '2', PAYOUT_LATE_PAYMENT_WATCH_HOURS: '0' };
  let resolve: (args: string[]) => Promise<{ stdout: string }>;

  before(async () => {
    app = await startTestApp({ config });
    const temporal = await localTemporal();
    ({ worker } = await createTestWorker(temporal, taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Payout operator');
    // The CLI runs with the app's settings (a refund's send needs the same confirmations) and fires its workflows on this Temporal server.
    resolve = (args) => cli(['payout:resolve', ...args], process.env.DATABASE_URL!, { ...config, TEMPORAL_ADDRESS: temporal.connection.options.address });
  });
  after(async () => {
    const { client } = await localTemporal();
    const em = app.deps.orm.em.fork();
    await terminateWorkflows(client, [
      ...CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]),
      ...(await em.find(PayoutTrip, { organization: org.organizationId })).map((trip) => payoutTripFlow.workflowId({ tripId: trip.id })),
      ...(await em.find(PayoutRefund, { organization: org.organizationId })).map((refund) => payoutRefundFlow.workflowId({ refundId: refund.id })),
    ]);
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const call = (method: string, path: string, body?: unknown) => app.request(method, path, { key: org.secret, body });
  const sats = async () => (await readBalances(app.deps.orm.em.fork(), org.organizationId, 'sandbox')).find((balance) => balance.currency === 'sat')!.available;

  /** A BTC payout to M-Pesa underpaid beyond the margin: 0.002 of 0.005 BTC, confirmed; held for an operator. */
  async function heldTrip(refundAddress?: string) {
    const offer = await call('POST', '/payouts/quotes', { fromAsset: 'BTC', chain: 'bitcoin', amount: '0.005', toCurrency: 'KES', country: 'KE', paymentMethod: 'mobile_money' });
    assert.equal(offer.status, 201, offer.text);
    const beneficiary = { type: 'mobile_money', phoneNumber: '+254712345678', network: 'MPESA', accountName: 'Wanjiru Kamau' };
    const trip = await call('POST', '/payouts/initialize', { quoteId: offer.body.quoteId, reference: `held-${randomUUID()}`, beneficiary, ...(refundAddress ? { refundAddress } : {}) });
    assert.equal(trip.status, 201, trip.text);
    assert.equal((await call('POST', `/v1/sandbox/payouts/trips/${trip.body.tripId}/deposit`, { amount: '0.002', confirmations: 2 })).status, 201);
    await eventually(async () => ((await call('GET', `/payouts/trips/${trip.body.tripId}`)).body.status === 'held' ? true : undefined), 'the trip held');
    return trip.body.tripId as string;
  }

  it('credits a held trip once: the trip fails, the balance is credited, the resolution audited; a repeat is refused and moves nothing', async () => {
    const tripId = await heldTrip();
    const before = await sats();
    await assert.rejects(resolve(['--trip', tripId]), /exactly one of --credit or --refund is required/);
    await assert.rejects(resolve(['--trip', tripId, '--refund']), new RegExp(`Trip ${tripId} has no refund address: resolve it with --credit`));
    assert.equal(await sats(), before, 'refusals move nothing');

    const resolved = JSON.parse((await resolve(['--trip', tripId, '--credit', '--operator', 'ops@example.com'])).stdout);
    assert.deepEqual([resolved.trip_id, resolved.status, resolved.resolution, resolved.resolved[0].amount_raw, resolved.resolved[0].currency], [tripId, 'failed', 'credit', '200000', 'sat']);
    assert.equal((await sats()) - before, 200_000n);
    const trip = (await call('GET', `/payouts/trips/${tripId}`)).body;
    assert.deepEqual([trip.status, trip.failure_reason, trip.creditedAmountRaw], ['failed', 'underpaid_beyond_margin', '200000']);
    const names = trip.timeline.map((entry: { name: string }) => entry.name);
    assert.deepEqual(names.slice(-3), ['held', 'failed', 'resolved_by_operator']);
    const audit = await app.deps.orm.em.fork().find(PolicyAuditLog, { organization: org.organizationId, action: 'payout_trip_resolved' });
    const ofTrip = audit.filter((entry) => entry.metadata.trip_id === tripId);
    assert.equal(ofTrip.length, 1);
    assert.deepEqual([ofTrip[0]!.actorName, ofTrip[0]!.id], ['ops@example.com', resolved.audit_log_id]);
    assert.deepEqual(ofTrip[0]!.changes, { status: ['held', 'failed'] });

    await assert.rejects(resolve(['--trip', tripId, '--credit']), new RegExp(`Trip ${tripId} is already resolved \\(credit at`));
    await assert.rejects(resolve(['--trip', tripId, '--refund']), /already resolved/);
    assert.equal((await sats()) - before, 200_000n, 'credited once');
  });

  it('refunds a held trip to its refund address, followed to refunded once mined; a repeat is refused', async () => {
    const vault = await call('POST', '/v1/vaults', { name: 'Refunds' });
    const wallet = await call('POST', '/v1/wallets', { name: 'Refunds', chain: 'bitcoin', vault_id: vault.body.id });
    const tripId = await heldTrip(wallet.body.primary_address.address);
    const before = await sats();
    const resolved = JSON.parse((await resolve(['--trip', tripId, '--refund'])).stdout);
    assert.deepEqual([resolved.status, resolved.resolution], ['failed', 'refund']);
    const refundId = resolved.resolved[0].refund_id as string;
    const pending = (await call('GET', `/payouts/trips/${tripId}`)).body;
    assert.deepEqual(
      pending.refunds.map((refund: { refundId: string; status: string; amountRaw: string; toAddress: string }) => [refund.refundId, refund.status, refund.amountRaw, refund.toAddress]),
      [[refundId, 'refund_pending', '200000', wallet.body.primary_address.address]],
    );
    await assert.rejects(resolve(['--trip', tripId, '--refund']), /already resolved/);

    const refunded = await mineRefund(app, org.secret, tripId, resolved.resolved[0].transaction_id);
    assert.deepEqual(refunded.timeline.map((entry: { name: string }) => entry.name).slice(-4), ['refund_pending', 'failed', 'resolved_by_operator', 'refunded']);
    assert.equal(await sats(), before, 'refunded, not credited');
  });

  it('refuses a trip that holds nothing and one that does not exist, with one clear line', async () => {
    const offer = await call('POST', '/payouts/quotes', { fromAsset: 'BTC', chain: 'bitcoin', amount: '0.005', toCurrency: 'KES', country: 'KE', paymentMethod: 'mobile_money' });
    const beneficiary = { type: 'mobile_money', phoneNumber: '+254712345678', network: 'MPESA', accountName: 'Wanjiru Kamau' };
    const trip = await call('POST', '/payouts/initialize', { quoteId: offer.body.quoteId, reference: `running-${randomUUID()}`, beneficiary });
    await assert.rejects(resolve(['--trip', trip.body.tripId, '--credit']), new RegExp(`Trip ${trip.body.tripId} is awaiting_deposit: it is still running and holds nothing to resolve.`));
    const missing = randomUUID();
    await assert.rejects(resolve(['--trip', missing, '--credit']), new RegExp(`No such payout trip: '${missing}'`));
  });
});
