import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import type { ServiceWorkers } from '../../src/worker-setup';
import { CHAIN_IDS } from '../../src/catalogue/service';
import { devnetBlocksWorkflowId } from '../../src/chains/flows/devnet-blocks';
import { canonicalJson } from '../../src/shared/canonical-json';
import { tripEvents } from '../support/trip-events';
import { chainScanWorkflowId } from '../../src/monitoring/flows/chain-scan';
import { openBeneficiary } from '../../src/payouts/beneficiaries';
import { PayoutQuote, PayoutRefund, PayoutTrip } from '../../src/payouts/entities';
import { payoutRefundFlow } from '../../src/payouts/flows/refund';
import { payoutTripFlow } from '../../src/payouts/flows/trip';
import { sealClearBeneficiaries } from '../../src/payouts/trips';
import { WorkflowStart } from '../../src/temporal/entities';
import { OrganizationId, ResourceId, ResourceType } from '../../src/temporal/search-attributes';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization, type TestResponse } from '../support/app';
import { localTemporal } from '../support/environment';
import { eventually } from '../support/eventually';
import { mineRefund } from '../support/payout-refunds';
import { terminateWorkflows } from '../support/scanning';
import { createTestWorker } from '../support/worker';

const NG_BANK = { type: 'bank', accountNumber: '0123456789', bankCode: '058', accountName: 'Ada Obi' };
const KE_MPESA = { type: 'mobile_money', phoneNumber: '+254712345678', network: 'MPESA', accountName: 'Wanjiru Kamau' };
const USDT_TRON_TO_NGN = { fromAsset: 'USDT', chain: 'tron', amount: '100', toCurrency: 'NGN', country: 'NG', paymentMethod: 'bank' };

/** Payout quotes and trips end to end: the real API, PostgreSQL, the Temporal dev server with its search attributes, and the devnet. */
describe('Payouts: trips from initialize through the sandbox deposit and rail to success, fetched, listed and idempotent', () => {
  let app: TestApp;
  let worker: ServiceWorkers | undefined;
  let running: Promise<void> | undefined;
  let org: TestOrganization;
  let other: TestOrganization;
  const taskQueue = `payouts-${randomUUID()}`;
  // The trip's workflow ends once the trip does (no late-payment watch), so its whole history can be read.
  const config = {
    TEMPORAL_TASK_QUEUE: taskQueue,
    DEVNET_BLOCK_INTERVAL_SECONDS: '3600',
    CHAIN_SCAN_INTERVAL_SECONDS: '0.2',
    CHAIN_CONFIRMATIONS_TRON: '2',
    CHAIN_CONFIRMATIONS_BITCOIN: '2',
    PAYOUT_LATE_PAYMENT_WATCH_HOURS: '0',
    PAYOUT_UNDERPAYMENT_RESOLUTION: 'refund',
  };

  before(async () => {
    app = await startTestApp({ config });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, config));
    running = worker.run();
    org = await createTestOrganization('Payouts');
    other = await createTestOrganization('Payouts, other');
  });
  after(async () => {
    const { client } = await localTemporal();
    const trips = await app.deps.orm.em.fork().find(PayoutTrip, {});
    await terminateWorkflows(client, [
      ...CHAIN_IDS.flatMap((chain) => [devnetBlocksWorkflowId(chain), chainScanWorkflowId(chain, 'sandbox')]),
      ...trips.map((trip) => payoutTripFlow.workflowId({ tripId: trip.id })),
      ...(await app.deps.orm.em.fork().find(PayoutRefund, {})).map((refund) => payoutRefundFlow.workflowId({ refundId: refund.id })),
    ]);
    worker?.shutdown();
    await running;
    await app?.close();
  });

  const call = (method: string, path: string, body?: unknown, key = org.secret) => app.request(method, path, { key, body });
  const expectError = (response: TestResponse, status: number, code: string, param?: string) => {
    assert.equal(response.status, status, response.text);
    assert.equal(response.body.error.code, code, response.text);
    if (param !== undefined) assert.equal(response.body.error.param, param, response.text);
  };
  async function quote(body: Record<string, unknown> = USDT_TRON_TO_NGN, key = org.secret) {
    const response = await call('POST', '/payouts/quotes', body, key);
    assert.equal(response.status, 201, response.text);
    return response.body as { quoteId: string; fromAmount: string; fromAmountRaw: string; toAmount: string; toAmountRaw: string; expiresAt: string };
  }
  async function initialize(quoteId: string, reference = `ref-${randomUUID()}`, extra: Record<string, unknown> = {}) {
    return call('POST', '/payouts/initialize', { quoteId, reference, beneficiary: NG_BANK, ...extra });
  }
  const tripCount = async (organizationId = org.organizationId) => app.deps.orm.em.fork().count(PayoutTrip, { organization: organizationId });

  /**
   * Neither the trip's row nor its stored events (webhook payloads) hold the masked digits of the
   * beneficiary's account or phone number, and the sealed copy opens to the whole beneficiary.
   */
  async function assertSealedAndMasked(tripId: string, beneficiary: typeof NG_BANK | typeof KE_MPESA) {
    const identifier = 'accountNumber' in beneficiary ? beneficiary.accountNumber : beneficiary.phoneNumber;
    const hidden = identifier.replace('+', '').slice(0, -4);
    const em = app.deps.orm.em.fork();
    const [row] = await em.getConnection().execute<{ row: string }[]>(`select t::text as row from payout_trips t where id = ?`, [tripId], 'all');
    assert.ok(row && !row.row.includes(hidden), row?.row);
    const events = await em.getConnection().execute<{ data: string }[]>(`select data::text as data from events where data->>'tripId' = ?`, [tripId], 'all');
    for (const event of events) assert.ok(!event.data.includes(hidden), event.data);
    assert.deepEqual(await openBeneficiary(app.deps.keys.provider, await em.findOneOrFail(PayoutTrip, tripId)), beneficiary, 'the rail is sent the whole beneficiary');
    return events.length;
  }

  it('runs a trip from quote to success through the sandbox deposit, with its timeline, fetch by reference, list and one workflow history', async () => {
    const offer = await quote();
    const reference = `invoice-${randomUUID()}`;
    const started = await initialize(offer.quoteId, reference);
    assert.equal(started.status, 201, started.text);
    const trip = started.body;
    assert.equal(trip.object, 'payout_trip');
    assert.equal(trip.status, 'awaiting_deposit');
    assert.equal(trip.quoteId, offer.quoteId);
    assert.equal(trip.amountToSend, offer.fromAmount);
    assert.equal(trip.amountToSendRaw, offer.fromAmountRaw);
    assert.equal(trip.toAmount, offer.toAmount);
    assert.equal(trip.expiresAt, offer.expiresAt);
    assert.match(trip.depositAddress, /^T[1-9A-HJ-NP-Za-km-z]{33}$/, 'a Tron address of the desk');
    assert.equal(trip.beneficiary.accountNumber, '******6789', 'the account number is masked');
    assert.equal(trip.workflow_id, payoutTripFlow.workflowId({ tripId: trip.tripId }));
    assert.equal(trip.late_payment_watch_until, null, 'no late-payment watch before the trip ends');
    assert.deepEqual(
      trip.timeline.map((entry: { name: string }) => entry.name),
      ['awaiting_deposit'],
    );

    const deposit = await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/deposit`, { amount: offer.fromAmount, confirmations: 2 });
    assert.equal(deposit.status, 201, deposit.text);
    assert.equal(deposit.body.amountRaw, offer.fromAmountRaw);
    const done = await eventually(async () => {
      const read = await call('GET', `/payouts/trips/${trip.tripId}`);
      return read.body.status === 'success' ? read.body : undefined;
    }, 'the trip paid out');
    assert.equal(done.amountReceived, offer.fromAmount);
    assert.equal(done.payoutAmount, offer.toAmount);
    assert.equal(done.rail, 'sandbox_bank');
    assert.equal(done.failure_reason, null);
    assert.deepEqual(done.refunds, [], 'nothing to refund');
    assert.ok(done.assetReceivedAt && done.assetConfirmedAt && done.completedAt);
    assert.equal(done.timeToFinishMs, Date.parse(done.completedAt) - Date.parse(done.createdAt));
    const names = done.timeline.map((entry: { name: string }) => entry.name);
    assert.deepEqual(names, ['awaiting_deposit', 'funded', 'asset_confirmed', 'processing', 'success']);
    const elapsed = done.timeline.map((entry: { elapsedMs: number }) => entry.elapsedMs);
    assert.deepEqual(elapsed, [...elapsed].sort((a, b) => a - b), 'the timeline is in order');

    const byReference = await call('GET', `/payouts/fetch/${reference}`);
    assert.equal(byReference.status, 200);
    assert.deepEqual(byReference.body, done);

    const successes = await call('GET', `/payouts?status=success&createdFrom=${encodeURIComponent(done.createdAt)}`);
    assert.ok(successes.body.data.some((listed: { tripId: string }) => listed.tripId === trip.tripId));
    const later = await call('GET', `/payouts?createdFrom=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`);
    assert.deepEqual(later.body.data, []);
    const expired = await call('GET', '/payouts?status=expired');
    assert.ok(!expired.body.data.some((listed: { tripId: string }) => listed.tripId === trip.tripId));

    // The events a webhook endpoint would receive, with the specification's payout fields.
    const ofTrip = await tripEvents(app.deps.orm.em.fork(), org.organizationId, trip.tripId);
    assert.deepEqual(
      ofTrip.map((event) => event.type),
      ['asset.received', 'payouts.processing', 'withdrawal.processing', 'payouts.withdrawal.success', 'withdrawal.success'],
    );
    const success = ofTrip.find((event) => event.type === 'payouts.withdrawal.success')!.data as Record<string, unknown>;
    for (const field of ['tripId', 'amountReceived', 'assetReceivedAt', 'assetConfirmedAt', 'failure_reason', 'expiresAt']) assert.ok(field in success, field);
    for (const event of ofTrip) assert.equal((event.data as typeof done).beneficiary.accountNumber, '******6789', event.type);
    assert.equal(await assertSealedAndMasked(trip.tripId, NG_BANK), ofTrip.length);

    // The whole trip is one workflow history, found by its search attributes.
    const { client } = await localTemporal();
    const handle = client.workflow.getHandle(payoutTripFlow.workflowId({ tripId: trip.tripId }));
    assert.equal(await handle.result(), 'success');
    // PAYOUT_LATE_PAYMENT_WATCH_HOURS=0: the workflow ended with the trip, and the trip says no watch runs.
    assert.equal(done.workflow_id, handle.workflowId);
    assert.equal(done.late_payment_watch_until, null);
    const description = await handle.describe();
    assert.equal(description.typedSearchAttributes.get(ResourceType), 'payout_trip');
    assert.equal(description.typedSearchAttributes.get(ResourceId), trip.tripId);
    assert.equal(description.typedSearchAttributes.get(OrganizationId), org.organizationId);
    const history = await handle.fetchHistory();
    const activities = (history.events ?? []).flatMap((event) => (event.activityTaskScheduledEventAttributes?.activityType?.name ? [event.activityTaskScheduledEventAttributes.activityType.name] : []));
    assert.equal(activities[0], 'openPayoutTrip');
    assert.deepEqual(
      [...new Set(activities)],
      ['openPayoutTrip', 'watchPayoutTripFunding', 'settlePayoutTrip', 'payPayoutTrip', 'finishPayoutTrip', 'resolveLatePayoutDeposits'],
    );
  });

  it('refunds an underpayment beyond the margin (PAYOUT_UNDERPAYMENT_RESOLUTION=refund): refund_pending on the failed trip, refunded once its send is mined', async () => {
    const vault = await call('POST', '/v1/vaults', { name: 'Refunds' });
    const wallet = await call('POST', '/v1/wallets', { name: 'Refunds', chain: 'bitcoin', vault_id: vault.body.id });
    const refundAddress = wallet.body.primary_address.address as string;
    const offer = await quote({ fromAsset: 'BTC', chain: 'bitcoin', amount: '0.005', toCurrency: 'KES', country: 'KE', paymentMethod: 'mobile_money' });
    const started = await call('POST', '/payouts/initialize', { quoteId: offer.quoteId, reference: `refund-${randomUUID()}`, beneficiary: KE_MPESA, refundAddress });
    assert.equal(started.status, 201, started.text);
    const trip = started.body;
    assert.deepEqual(trip.refunds, []);
    assert.equal((await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/deposit`, { amount: '0.002', confirmations: 2 })).status, 201);
    const failed = await eventually(async () => {
      const read = await call('GET', `/payouts/trips/${trip.tripId}`);
      return read.body.status === 'failed' ? read.body : undefined;
    }, 'the underpaid trip failed');
    assert.equal(failed.failure_reason, 'underpaid_beyond_margin');
    assert.equal(failed.refunds.length, 1);
    const [pending] = failed.refunds;
    assert.deepEqual([pending.status, pending.reason, pending.assetId, pending.amountRaw, pending.toAddress, pending.attempts], ['refund_pending', 'underpayment', 'BTC', '200000', refundAddress, 1]);
    assert.equal(pending.completedAt, null);

    const refunded = await mineRefund(app, org.secret, trip.tripId, pending.transactionId);
    assert.equal(refunded.refunds[0].transactionId, pending.transactionId, 'the first send settled');
    assert.ok(refunded.refunds[0].txHash && refunded.refunds[0].completedAt);
    assert.equal(refunded.creditedAmount, null, 'refunded, not credited');
    const names = refunded.timeline.map((entry: { name: string }) => entry.name);
    assert.deepEqual(names.slice(-3), ['refund_pending', 'failed', 'refunded']);
    const entry = refunded.timeline.find((each: { name: string }) => each.name === 'refunded');
    assert.equal(entry.details.refund_id, pending.refundId);
    assert.equal(entry.details.tx_hash, refunded.refunds[0].txHash);
    assert.deepEqual(await call('GET', `/payouts/fetch/${trip.reference}`).then((read) => read.body.refunds), refunded.refunds);
    const announced = (await tripEvents(app.deps.orm.em.fork(), org.organizationId, trip.tripId)).find((event) => event.type === 'payouts.refund.refunded');
    assert.deepEqual((announced?.data as { refund: unknown } | undefined)?.refund, refunded.refunds[0], 'announced with the refund');
  });

  it("seals a mobile-money beneficiary: the phone number masked in the API, the stored row and every event, the whole number paid by the rail", async () => {
    const offer = await quote({ ...USDT_TRON_TO_NGN, toCurrency: 'KES', country: 'KE', paymentMethod: 'mobile_money' });
    const started = await call('POST', '/payouts/initialize', { quoteId: offer.quoteId, reference: `mpesa-${randomUUID()}`, beneficiary: KE_MPESA });
    assert.equal(started.status, 201, started.text);
    const trip = started.body;
    assert.deepEqual(trip.beneficiary, { ...KE_MPESA, phoneNumber: '*********5678' });
    assert.equal((await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/deposit`, { amount: offer.fromAmount, confirmations: 2 })).status, 201);
    // The sandbox mobile-money rail, like a real network, pays no masked number: success means it got the whole one.
    const done = await eventually(async () => {
      const read = await call('GET', `/payouts/trips/${trip.tripId}`);
      return read.body.status === 'success' ? read.body : undefined;
    }, 'the trip paid out');
    assert.equal(done.beneficiary.phoneNumber, '*********5678');
    const listed = (await call('GET', '/payouts')).body.data.find((each: { tripId: string }) => each.tripId === trip.tripId);
    assert.equal(listed.beneficiary.phoneNumber, '*********5678');
    const ofTrip = await tripEvents(app.deps.orm.em.fork(), org.organizationId, trip.tripId);
    assert.ok(ofTrip.some((event) => event.type === 'payouts.withdrawal.success'));
    for (const event of ofTrip) assert.equal((event.data as typeof done).beneficiary.phoneNumber, '*********5678', event.type);
    assert.equal(await assertSealedAndMasked(trip.tripId, KE_MPESA), ofTrip.length);
  });

  it('seals a trip stored before beneficiaries were sealed (the cli migrate step), masked in the API and paid in full until then', async () => {
    const offer = await quote();
    const reference = `legacy-${randomUUID()}`;
    const trip = (await initialize(offer.quoteId, reference)).body;
    const em = app.deps.orm.em.fork();
    const fullBodyHash = createHash('sha256').update(canonicalJson({ quoteId: offer.quoteId, reference, beneficiary: NG_BANK })).digest('hex');
    await em.getConnection().execute(`update payout_trips set beneficiary = ?::jsonb, beneficiary_sealed = null, request_hash = ? where id = ?`, [JSON.stringify(NG_BANK), fullBodyHash, trip.tripId]);
    assert.equal((await call('GET', `/payouts/trips/${trip.tripId}`)).body.beneficiary.accountNumber, '******6789', 'masked on the way out');
    assert.deepEqual(await openBeneficiary(app.deps.keys.provider, await em.findOneOrFail(PayoutTrip, trip.tripId)), NG_BANK, 'the rail is sent the stored number');

    assert.ok((await sealClearBeneficiaries(em, app.deps.keys.provider)) >= 1);
    await assertSealedAndMasked(trip.tripId, NG_BANK);
    const [stored] = await em.getConnection().execute<{ beneficiary: unknown }[]>(`select beneficiary from payout_trips where id = ?`, [trip.tripId], 'all');
    assert.deepEqual(stored?.beneficiary, { ...NG_BANK, accountNumber: '******6789' });
    assert.equal((await initialize(offer.quoteId, reference)).body.tripId, trip.tripId, 'rehashed without the number: a repeat still finds the trip');
  });

  it('fails a trip whose rail the sandbox sets to fail, with failure_reason on the trip and its fetch', async () => {
    const offer = await quote();
    const reference = `failing-${randomUUID()}`;
    const trip = (await initialize(offer.quoteId, reference)).body;
    assert.equal((await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/outcome`, { outcome: 'failed', failureReason: 'account_closed' })).status, 200);
    assert.equal((await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/deposit`, { amount: offer.fromAmount, confirmations: 2 })).status, 201);
    const failed = await eventually(async () => {
      const read = await call('GET', `/payouts/fetch/${reference}`);
      return read.body.status === 'failed' ? read.body : undefined;
    }, 'the trip failed');
    assert.equal(failed.failure_reason, 'account_closed');
    assert.equal(failed.creditedAmount, offer.fromAmount, 'the funds are credited back');
    const outcome = await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/outcome`, { outcome: 'success' });
    assert.equal(outcome.body.submissions, 1);
    assert.equal(outcome.body.paidAt, null);
  });

  it('sends one transfer per Idempotency-Key from the deposit helper: a retry after the first attempt died past its transfer (killed, or a 5xx that released the claim) answers it and mines again', async () => {
    const offer = await quote();
    const started = await initialize(offer.quoteId);
    assert.equal(started.status, 201, started.text);
    const trip = started.body;
    const key = `deposit-${randomUUID()}`;
    const deposit = (idempotencyKey: string) =>
      app.request('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/deposit`, { key: org.secret, body: { amount: offer.fromAmount, confirmations: 1 }, headers: { 'idempotency-key': idempotencyKey } });
    const first = await deposit(key);
    assert.equal(first.status, 201, first.text);
    const sql = <T>(query: string, params: unknown[]) => app.deps.orm.em.fork().getConnection().execute<T[]>(query, params, 'all');
    const tipOf = async () => Number((await sql<{ height: number }>(`select max(height) as height from devnet_blocks where chain = 'tron'`, []))[0]!.height);
    // What each failure leaves behind: the transfer committed and the claim in flight past its lock (the API killed while it
    // mined), or no claim at all (a 5xx while Temporal was down releases it). Either way the retry runs the handler again.
    const failures = {
      killed: `update idempotency_records set locked_at = now() - interval '1 hour', status = 'in_flight', response_status = null, response_body = null where organization_id = ? and key = ?`,
      released: `delete from idempotency_records where organization_id = ? and key = ?`,
    };
    for (const [failure, statement] of Object.entries(failures)) {
      await sql(statement, [org.organizationId, key]);
      const tip = await tipOf();
      const retry = await deposit(key);
      assert.equal(retry.status, 201, `${failure}: ${retry.text}`);
      assert.equal(retry.headers.get('idempotent-replayed'), null, `${failure}: the handler ran again`);
      assert.deepEqual(retry.body, first.body, `${failure}: the same transfer`);
      assert.equal(await tipOf(), tip + 1, `${failure}: the retry mined its block again`);
    }
    const transfers = await sql<{ txid: string }>(
      `select i.txid from incoming_transfers i join payout_trips t on t.deposit_address_record_id = i.address_id where t.id = ?`,
      [trip.tripId],
    );
    assert.deepEqual(transfers.map((row) => row.txid), [first.body.txHash], 'one transfer reached the deposit address');
    const done = await eventually(async () => {
      const read = await call('GET', `/payouts/trips/${trip.tripId}`);
      return read.body.status === 'success' ? read.body : undefined;
    }, 'the trip paid out');
    assert.equal(done.amountReceived, offer.fromAmount, 'paid once, nothing in excess');
    assert.equal(done.creditedAmount, null);
  });

  it('returns the same trip for the same reference, also under 20 concurrent calls, and 409 for another body', async () => {
    const offer = await quote();
    const reference = `concurrent-${randomUUID()}`;
    const before = await tripCount();
    const responses = await Promise.all(Array.from({ length: 20 }, () => initialize(offer.quoteId, reference)));
    for (const response of responses) assert.equal(response.status, 201, response.text);
    const ids = new Set(responses.map((response) => response.body.tripId));
    assert.equal(ids.size, 1, 'one trip');
    assert.equal(new Set(responses.map((response) => response.body.depositAddress)).size, 1, 'one deposit address');
    assert.equal((await tripCount()) - before, 1);
    const [tripId] = [...ids];
    const starts = await app.deps.orm.em.fork().count(WorkflowStart, { workflowId: payoutTripFlow.workflowId({ tripId: tripId! }) });
    assert.equal(starts, 1, 'one workflow');

    const again = await initialize(offer.quoteId, reference);
    assert.equal(again.body.tripId, tripId);
    expectError(await call('POST', '/payouts/initialize', { quoteId: offer.quoteId, reference, beneficiary: { ...NG_BANK, accountName: 'Someone Else' } }), 409, 'idempotency_key_reused', 'reference');
    // Another account with the same last four digits: the stored hash leaves the number out, the sealed one tells them apart.
    expectError(await call('POST', '/payouts/initialize', { quoteId: offer.quoteId, reference, beneficiary: { ...NG_BANK, accountNumber: '9876546789' } }), 409, 'idempotency_key_reused', 'reference');
    const fullBodyHash = createHash('sha256').update(canonicalJson({ quoteId: offer.quoteId, reference, beneficiary: NG_BANK })).digest('hex');
    assert.notEqual((await app.deps.orm.em.fork().findOneOrFail(PayoutTrip, tripId!)).requestHash, fullBodyHash, 'no hash of the account number is stored');
    expectError(await initialize(offer.quoteId), 409, 'quote_already_used');
  });

  it('refuses an expired quote with quote_expired (rule 1), and bad input with a named 400, creating nothing', async () => {
    const offer = await quote();
    const em = app.deps.orm.em.fork();
    await em.nativeUpdate(PayoutQuote, { id: offer.quoteId }, { expiresAt: new Date(Date.now() - 1000) });
    const before = await tripCount();
    expectError(await initialize(offer.quoteId), 400, 'quote_expired', 'quoteId');

    const fresh = await quote();
    expectError(await initialize(fresh.quoteId, 'bad-refund', { refundAddress: '0x0000000000000000000000000000000000000001' }), 400, 'validation_failed', 'refundAddress');
    expectError(await call('POST', '/payouts/initialize', { quoteId: fresh.quoteId, reference: 'bad-account', beneficiary: { ...NG_BANK, accountNumber: '12345' } }), 400, 'validation_failed', 'beneficiary.accountNumber');
    expectError(await call('POST', '/payouts/initialize', { quoteId: randomUUID(), reference: 'no-quote', beneficiary: NG_BANK }), 404, 'resource_missing', 'quoteId');
    expectError(await call('POST', '/payouts/initialize', { quoteId: fresh.quoteId, reference: 'x'.repeat(101), beneficiary: NG_BANK }), 400, 'validation_failed', 'reference');
    expectError(await call('POST', '/payouts/initialize', { quoteId: fresh.quoteId, beneficiary: NG_BANK }), 400, 'validation_failed', 'reference');
    expectError(await call('GET', '/payouts?status=lost'), 400, 'validation_failed', 'status');
    expectError(await call('GET', '/payouts?createdFrom=yesterday'), 400, 'validation_failed', 'createdFrom');
    expectError(await call('POST', `/v1/sandbox/payouts/trips/${randomUUID()}/deposit`, { amount: '1' }), 404, 'resource_missing');
    assert.equal(await tripCount(), before, 'nothing was created');
  });

  it('keeps trips to their organization and environment, and the sandbox helpers and writes to their scopes', async () => {
    const offer = await quote();
    const trip = (await initialize(offer.quoteId)).body;
    expectError(await call('GET', `/payouts/trips/${trip.tripId}`, undefined, other.secret), 404, 'resource_missing');
    expectError(await call('GET', `/payouts/fetch/${trip.reference}`, undefined, other.secret), 404, 'resource_missing');
    expectError(await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/outcome`, { outcome: 'failed' }, other.secret), 404, 'resource_missing');
    const unused = await quote();
    expectError(await call('POST', '/payouts/initialize', { quoteId: unused.quoteId, reference: 'stolen', beneficiary: NG_BANK }, other.secret), 404, 'resource_missing', 'quoteId');
    assert.ok(!(await call('GET', '/payouts', undefined, other.secret)).body.data.some((listed: { tripId: string }) => listed.tripId === trip.tripId));

    const live = await org.key(['*'], 'live');
    expectError(await call('GET', `/payouts/trips/${trip.tripId}`, undefined, live.secret), 404, 'resource_missing');
    assert.equal((await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/deposit`, { amount: '1' }, live.secret)).status, 404);

    const reader = await org.key(['payouts:read']);
    assert.equal((await call('GET', `/payouts/trips/${trip.tripId}`, undefined, reader.secret)).status, 200);
    expectError(await call('POST', '/payouts/initialize', { quoteId: offer.quoteId, reference: 'read-only', beneficiary: NG_BANK }, reader.secret), 403, 'insufficient_scope');
    expectError(await call('POST', `/v1/sandbox/payouts/trips/${trip.tripId}/outcome`, { outcome: 'failed' }, reader.secret), 403, 'insufficient_scope');
  });
});
