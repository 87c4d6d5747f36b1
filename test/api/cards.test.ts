import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { ServiceWorkers as Worker } from '../../src/worker-setup';
import { Card, CardTransaction, Customer } from '../../src/cards/entities';
import { isLuhnValid } from '../../src/cards/issuer';
import { Event } from '../../src/events/entities';
import { eventually } from '../support/eventually';
import { createTestOrganization, startTestApp, type TestApp, type TestOrganization } from '../support/app';
import { requestBalanceMove } from '../../src/cards/balance-moves';
import { sweepStarts, validCustomer, workflowStarts } from '../support/cards';
import { assertLedgerReconciles, companyBalanceEntries } from '../support/ledger';
import { WebhookReceiver } from '../support/webhook-receiver';
import { localTemporal, testOrm } from '../support/environment';
import { needStripeMock, startStripeMockIfInstalled, type StripeMock } from '../support/stripe-mock';
import { createTestWorker } from '../support/worker';

const FEE_BPS = 150;
const HOUR = 3600_000;


describe('Cards API', () => {
  let app: TestApp;
  let org: TestOrganization;
  let worker: Worker;
  let running: Promise<void>;
  let stripeMock: StripeMock | null;
  const taskQueue = `cards-api-${randomUUID()}`;

  before(async () => {
    // Live cards are minted by Stripe Issuing: stripe-mock stands in for it.
    stripeMock = await startStripeMockIfInstalled();
    app = await startTestApp({
      config: { TEMPORAL_TASK_QUEUE: taskQueue, CARD_FUNDING_FEE_BPS: String(FEE_BPS), RATE_LIMIT_PER_SECOND: '1000', RATE_LIMIT_BURST: '1000', ...stripeMock?.config },
    });
    ({ worker } = await createTestWorker(await localTemporal(), taskQueue, stripeMock?.config));
    running = worker.run();
    org = await createTestOrganization();
  });
  after(async () => {
    worker?.shutdown();
    await running;
    await app?.close();
    await stripeMock?.stop();
  });

  const credit = (amount: number, organization = org) =>
    app.request('POST', '/v1/sandbox/balances', { key: organization.secret, body: { currency: 'usd', amount: String(amount) } });
  const usdBalance = async (organization = org) => {
    const response = await app.request('GET', '/v1/balances', { key: organization.secret });
    return response.body.data.find((balance: { currency: string }) => balance.currency === 'USD') as { available: string; reserved: string };
  };
  const createCard = (body: Record<string, unknown> = {}, organization = org) =>
    app.request('POST', '/api/cards', {
      key: organization.secret,
      body: { amount: 0, card_type: 'virtual', currency: 'USD', name: 'Ada Lovelace', customer: validCustomer(), ...body },
    });
  const getCard = async (cardId: string, organization = org) => (await app.request('GET', `/api/cards/${cardId}`, { key: organization.secret })).body.data.card;
  const activeCard = async (body: Record<string, unknown> = {}, organization = org) => {
    const created = await createCard(body, organization);
    assert.equal(created.status, 201, created.text);
    const id = created.body.data.card.id as string;
    return eventually(async () => {
      const card = await getCard(id, organization);
      return card.status === 'active' ? card : undefined;
    }, 'card to become active');
  };
  const transactions = async (cardId: string, query = '') =>
    (await app.request('GET', `/api/cards/${cardId}/transactions${query}`, { key: org.secret })).body.data.transactions as Record<string, string>[];
  const settled = (cardId: string, transactionId: string) =>
    eventually(async () => (await transactions(cardId)).find((tx) => tx.id === transactionId && tx.status !== 'pending'), 'settlement');
  const moveBalance = (cardId: string, body: Record<string, unknown>) => app.request('POST', `/api/cards/${cardId}/balance`, { key: org.secret, body });
  const authorize = (cardId: string, body: Record<string, unknown>) =>
    app.request('POST', `/v1/sandbox/cards/${cardId}/authorizations`, { key: org.secret, body });
  /** Moves the card's creation back, as if it had been created `hours` ago. */
  const age = async (cardId: string, hours: number) => {
    const em = (await testOrm()).em.fork();
    await em.nativeUpdate(Card, { id: cardId }, { createdAt: new Date(Date.now() - hours * HOUR) });
  };

  describe('create', () => {
    it('validates the customer: country, dial code, date of birth, email, ID formats', async () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ country: 'US' }, 'customer.country'],
        [{ country: 'XYZ' }, 'customer.country'],
        [{ dial_code: '1' }, 'customer.dial_code'],
        [{ date_of_birth: '2999-01-01' }, 'customer.date_of_birth'],
        [{ date_of_birth: '1990-02-30' }, 'customer.date_of_birth'],
        [{ email: 'not-an-email' }, 'customer.email'],
        [{ id_type: 'passport', id_number: '12' }, 'customer.id_number'],
        [{ id_type: 'national_id', id_number: '12345' }, 'customer.id_number'],
        [{ postal_code: 'ABC' }, 'customer.postal_code'],
      ];
      for (const [override, param] of cases) {
        const response = await createCard({ customer: validCustomer(override) });
        assert.equal(response.status, 400, JSON.stringify(override));
        assert.equal(response.body.error.code, 'validation_failed');
        assert.equal(response.body.error.param, param, JSON.stringify(override));
      }
      const missing: Record<string, unknown> = validCustomer();
      delete missing.first_name;
      assert.equal((await createCard({ customer: missing })).body.error.param, 'customer.first_name');
      // Outside the USA a state is free text and a postal code any format.
      assert.equal((await createCard({ customer: validCustomer({ country: 'GBR', state: 'Greater London', postal_code: 'SW1A 1AA' }) })).status, 201);
    });

    it('answers pending/processing, then provisions a Luhn-valid card from the BIN and funds it (fee from the company balance)', async () => {
      await credit(100_000);
      const before = BigInt((await usdBalance()).available);
      const created = await createCard({ amount: 10_000, card_limits: { single_transaction: '50.00', monthly: '1000' } });
      assert.equal(created.status, 201, created.text);
      const { card } = created.body.data;
      assert.equal(created.body.success, true);
      assert.ok(created.body.metadata.request_id);
      assert.equal(card.status, 'pending');
      assert.equal(card.created_status, 'processing');
      assert.equal(card.masked_pan, '');
      assert.equal(card.balance_amount, '0');
      assert.deepEqual(card.spending_limits, { single_transaction: '5000', monthly: '100000' });
      // The initial funding and its fee are reserved at once.
      const fee = (10_000n * BigInt(FEE_BPS)) / 10_000n;
      assert.equal(BigInt((await usdBalance()).available), before - 10_000n - fee);

      const active = await eventually(async () => {
        const current = await getCard(card.id);
        return current.status === 'active' && current.balance_amount === '10000' ? current : undefined;
      }, 'provisioned and funded card');
      assert.equal(active.created_status, 'completed');
      assert.equal(active.workflow_id, `card-provisioning-${card.id}`);
      assert.equal(active.termination_workflow_id, null);
      assert.match(active.masked_pan, /^489537\*{6}\d{4}$/);
      const balance = await usdBalance();
      assert.equal(BigInt(balance.available), before - 10_000n - fee);
      assert.equal(balance.reserved, '0');
      const [funding] = await transactions(card.id);
      assert.equal(funding!.type, 'funding');
      assert.equal(funding!.status, 'completed');
      assert.equal(funding!.fee_amount, fee.toString());
      assert.equal(funding!.fee_type, 'funding_fee');
      // The initial funding is settled by the provisioning workflow.
      assert.equal(funding!.workflow_id, `card-provisioning-${card.id}`);

      const secure = await app.request('GET', `/api/cards/${card.id}/secure`, { key: org.secret });
      assert.equal(secure.status, 200);
      assert.ok(isLuhnValid(secure.body.data.pan));
      assert.ok(secure.body.data.pan.startsWith('489537'));
      assert.equal(secure.body.data.pan.slice(-4), active.last_four);
      assert.match(secure.body.data.cvv, /^\d{3}$/);
      assert.match(secure.body.data.expiry, /^\d{2}\/\d{2}$/);
      // Nothing else carries the number.
      assert.ok(!JSON.stringify(await getCard(card.id)).includes(secure.body.data.pan));
      const reader = await org.key(['cards:read', 'cards:write']);
      const refused = await app.request('GET', `/api/cards/${card.id}/secure`, { key: reader.secret });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error.details.required_scope, 'cards:secure');
      // At rest the PAN is ciphertext.
      const row = await (await testOrm()).em.fork().findOneOrFail(Card, { id: card.id });
      assert.ok(!JSON.stringify(row.secrets).includes(secure.body.data.pan));

      const ready = await eventually(
        async () => (await (await testOrm()).em.fork().findOne(Event, { organization: org.organizationId, type: 'card.ready', dedupeKey: `card.ready:${card.id}` })) ?? undefined,
        'card.ready event',
      );
      assert.equal((ready.data as { masked_pan: string }).masked_pan, active.masked_pan);
    });

    it("signs card events to the card's webhook_url with the card's own secret, shown once at creation", async () => {
      const receiver = await new WebhookReceiver().start();
      try {
        const created = await createCard({ webhook_url: receiver.url });
        const secret = created.body.data.card.webhook_signing_secret as string;
        assert.match(secret, /^whsec_/);
        receiver.secrets = [secret];
        const ready = await eventually(
          async () => receiver.attempts.find((attempt) => JSON.parse(attempt.body).type === 'card.ready'),
          'card.ready at the webhook_url',
        );
        assert.deepEqual(ready.verifiedWith, [true]);
        assert.equal(JSON.parse(ready.body).data.id, created.body.data.card.id);
        assert.equal((await getCard(created.body.data.card.id)).webhook_signing_secret, undefined);
      } finally {
        await receiver.close();
      }
    });

    it('ends a provisioning the issuer refuses in status failed, releasing the initial funding', async () => {
      await credit(5_000);
      const before = await usdBalance();
      const created = await createCard({ amount: 1_000, name: 'issuer_decline' });
      const failed = await eventually(async () => {
        const card = await getCard(created.body.data.card.id);
        return card.created_status === 'failed' ? card : undefined;
      }, 'failed provisioning');
      assert.equal(failed.status, 'failed');
      assert.equal(failed.masked_pan, '');
      await eventually(async () => ((await usdBalance()).available === before.available && (await usdBalance()).reserved === '0' ? true : undefined), 'release');
    });

    it('refuses an initial amount the company balance cannot cover, up front', async () => {
      const poor = await createTestOrganization('Poor');
      const response = await createCard({ amount: 1_000 }, poor);
      assert.equal(response.status, 400);
      assert.equal(response.body.error.code, 'insufficient_funds');
    });

    it('reuses the customer with the same identity document', async () => {
      const customer = validCustomer();
      const first = await createCard({ customer });
      const second = await createCard({ customer });
      assert.equal(first.body.data.card.customer_id, second.body.data.card.customer_id);
      const customerId = first.body.data.card.customer_id;
      const got = await app.request('GET', `/api/customers/${customerId}`, { key: org.secret });
      assert.equal(got.body.data.customer.first_name, 'Ada');
      const cards = await app.request('GET', `/api/customers/${customerId}/cards`, { key: org.secret });
      assert.equal(cards.body.total, 2);
      assert.deepEqual(Object.keys(cards.body.cards[0]).sort(), ['balance', 'card_brand', 'card_type', 'created_at', 'currency', 'customer_id', 'id', 'last_four', 'status']);
    });
  });

  describe('fund and withdraw', () => {
    it('answers pending with balance_before = balance_after, then settles with exact balances and fee', async () => {
      await credit(50_000);
      const card = await activeCard();
      const before = BigInt((await usdBalance()).available);
      const funded = await moveBalance(card.id, { type: 'fund', amount: 2_000, reference: `ref-${randomUUID()}` });
      assert.equal(funded.status, 200, funded.text);
      const pending = funded.body.data.transaction;
      assert.equal(funded.body.data.success, false);
      assert.equal(pending.status, 'pending');
      assert.equal(pending.type, 'funding');
      assert.equal(pending.balance_before, pending.balance_after);
      assert.equal(pending.workflow_id, `card-balance-${pending.id}`);
      const completed = await settled(card.id, pending.id);
      assert.equal(completed.status, 'completed');
      assert.equal(completed.balance_before, '0');
      assert.equal(completed.balance_after, '2000');
      assert.equal(completed.fee_amount, '30');
      assert.equal(BigInt((await usdBalance()).available), before - 2_030n);

      const withdrawn = await moveBalance(card.id, { type: 'withdraw', amount: 1_000, reference: `ref-${randomUUID()}` });
      const withdrawal = await settled(card.id, withdrawn.body.data.transaction.id);
      assert.equal(withdrawal.type, 'withdrawal');
      assert.equal(withdrawal.balance_after, '1000');
      assert.equal(withdrawal.fee_amount, '15');
      assert.equal(BigInt((await usdBalance()).available), before - 2_030n + 985n);
      assert.equal((await getCard(card.id)).balance_amount, '1000');

      const tooMuch = await moveBalance(card.id, { type: 'withdraw', amount: 1_001, reference: `ref-${randomUUID()}` });
      assert.equal(tooMuch.status, 400);
      assert.equal(tooMuch.body.error.code, 'insufficient_funds');
      // Currency codes as GET /v1/balances and the cards show them, in cents.
      assert.deepEqual([tooMuch.body.error.details.currency, tooMuch.body.error.details.unit], ['USD', 'cent']);
      const poor = await moveBalance(card.id, { type: 'fund', amount: 10_000_000, reference: `ref-${randomUUID()}` });
      assert.equal(poor.status, 400);
      assert.equal(poor.body.error.code, 'insufficient_funds');
      assert.deepEqual([poor.body.error.details.currency, poor.body.error.details.unit], ['USD', 'cent']);

      const failed = await moveBalance(card.id, { type: 'fund', amount: 13, reference: `ref-${randomUUID()}` });
      assert.equal((await settled(card.id, failed.body.data.transaction.id)).status, 'failed');
      assert.equal((await usdBalance()).reserved, '0');
      assert.equal((await getCard(card.id)).balance_amount, '1000');
      assert.equal((await transactions(card.id, '?type=withdrawal')).length, 1);
      assert.equal((await transactions(card.id, '?status=failed')).length, 1);
      await assertLedgerReconciles(org.organizationId);
    });

    it('creates one transaction for 50 concurrent requests with one reference', async () => {
      await credit(10_000);
      const card = await activeCard();
      const before = BigInt((await usdBalance()).available);
      const reference = `ref-${randomUUID()}`;
      const responses = await Promise.all(Array.from({ length: 50 }, () => moveBalance(card.id, { type: 'fund', amount: 100, reference })));
      assert.ok(responses.every((response) => response.status === 200), responses.map((response) => response.text).join('\n'));
      assert.equal(new Set(responses.map((response) => response.body.data.transaction.id)).size, 1);
      await settled(card.id, responses[0]!.body.data.transaction.id);
      assert.equal(BigInt((await usdBalance()).available), before - 101n);
      assert.equal((await getCard(card.id)).balance_amount, '100');
      const repeat = await moveBalance(card.id, { type: 'fund', amount: 100, reference });
      assert.equal(repeat.body.data.transaction.status, 'completed');
      assert.equal((await transactions(card.id, '?type=funding')).length, 1);
      await assertLedgerReconciles(org.organizationId);
    });
    it('lets one of concurrent requests with one reference on two cards through; the others are told the reference is reused', async () => {
      await credit(10_000);
      const [first, second] = await Promise.all([activeCard(), activeCard()]);
      const before = BigInt((await usdBalance()).available);
      const reference = `ref-${randomUUID()}`;
      const responses = await Promise.all(Array.from({ length: 20 }, (_, index) => moveBalance((index % 2 === 0 ? first : second).id, { type: 'fund', amount: 100, reference })));
      const accepted = responses.filter((response) => response.status === 200);
      assert.equal(new Set(accepted.map((response) => response.body.data.transaction.id)).size, 1, responses.map((response) => response.text).join('\n'));
      const refused = responses.filter((response) => response.status !== 200);
      // The card lock serializes each card's ten: those of the card that won all get the original.
      assert.equal(refused.length, 10);
      for (const response of refused) assert.equal(response.body.error.code, 'idempotency_key_reused', response.text);
      const fundedCard = accepted[0]!.body.data.transaction.card_id as string;
      await settled(fundedCard, accepted[0]!.body.data.transaction.id);
      assert.equal(BigInt((await usdBalance()).available), before - 101n);
      const balances = [(await getCard(first.id)).balance_amount, (await getCard(second.id)).balance_amount].sort();
      assert.deepEqual(balances, ['0', '100']);
      await assertLedgerReconciles(org.organizationId);
    });
  });

  describe('status, authorizations and limits', () => {
    it('freezes (authorizations declined) and unfreezes; other statuses are invalid_status', async () => {
      await credit(5_000);
      const card = await activeCard({ amount: 1_000 });
      await eventually(async () => ((await getCard(card.id)).balance_amount === '1000' ? true : undefined), 'funding');
      const invalid = await app.request('POST', `/api/cards/${card.id}/status`, { key: org.secret, body: { status: 'terminated' } });
      assert.equal(invalid.status, 400);
      assert.equal(invalid.body.error.code, 'invalid_status');
      const frozen = await app.request('POST', `/api/cards/${card.id}/status`, { key: org.secret, body: { status: 'frozen' } });
      assert.equal(frozen.body.message, 'Card frozen successfully');
      assert.equal(frozen.body.data.card.status, 'frozen');
      const declined = await authorize(card.id, { amount: 100, merchant_name: 'Coffee' });
      assert.equal(declined.body.data.approved, false);
      assert.equal(declined.body.data.decline_reason, 'card_frozen');
      const active = await app.request('POST', `/api/cards/${card.id}/status`, { key: org.secret, body: { status: 'active' } });
      assert.equal(active.body.message, 'Card activated successfully');
      const approved = await authorize(card.id, { amount: 100 });
      assert.equal(approved.body.data.approved, true);
      assert.equal(approved.body.data.transaction.balance_after, '900');
      assert.equal((await authorize(card.id, { amount: 901 })).body.data.decline_reason, 'insufficient_funds');
      const purchases = await transactions(card.id, '?type=purchase');
      assert.deepEqual(purchases.map((tx) => tx.status), ['declined', 'completed', 'declined']);
      assert.deepEqual(purchases.map((tx) => tx.workflow_id), [null, null, null]);
    });

    it('checks every limit window at its edges (transaction, daily, rolling week, calendar month, yearly, all time)', async () => {
      await credit(100_000);
      const card = await activeCard({ amount: 50_000 });
      await eventually(async () => ((await getCard(card.id)).balance_amount === '50000' ? true : undefined), 'funding');
      const limits = async (body: Record<string, number | null>) => {
        const response = await app.request('PUT', `/api/cards/${card.id}/spend-limits`, { key: org.secret, body });
        assert.equal(response.status, 200, response.text);
        return response.body.data.card.spending_limits;
      };
      const at = (value: string) => ({ occurred_at: value });
      assert.deepEqual(await limits({ transaction: 1_000 }), { single_transaction: '1000' });
      assert.equal((await authorize(card.id, { amount: 1_000, ...at('2026-01-01T00:00:00.000Z') })).body.data.approved, true);
      assert.equal((await authorize(card.id, { amount: 1_001, ...at('2026-01-01T00:00:00.000Z') })).body.data.decline_reason, 'spending_limit_transaction');

      // Rolling week: 1000 spent at 2026-01-01T00:00Z falls out exactly 7 days later.
      await limits({ weekly: 1_500 });
      assert.equal((await authorize(card.id, { amount: 501, ...at('2026-01-07T23:59:59.999Z') })).body.data.decline_reason, 'spending_limit_weekly');
      assert.equal((await authorize(card.id, { amount: 500, ...at('2026-01-07T23:59:59.999Z') })).body.data.approved, true);
      assert.equal((await authorize(card.id, { amount: 1, ...at('2026-01-07T23:59:59.999Z') })).body.data.decline_reason, 'spending_limit_weekly');
      assert.equal((await authorize(card.id, { amount: 1_001, ...at('2026-01-08T00:00:00.000Z') })).body.data.decline_reason, 'spending_limit_weekly');
      assert.equal((await authorize(card.id, { amount: 1_000, ...at('2026-01-08T00:00:00.000Z') })).body.data.approved, true);

      // Calendar month: January's 2500 are spent; February starts fresh at midnight UTC.
      await limits({ monthly: 2_600 });
      assert.equal((await authorize(card.id, { amount: 101, ...at('2026-01-31T23:59:59.999Z') })).body.data.decline_reason, 'spending_limit_monthly');
      assert.equal((await authorize(card.id, { amount: 2_600, ...at('2026-02-01T00:00:00.000Z') })).body.data.approved, true);

      // Daily (UTC day) and yearly (calendar year), all time.
      await limits({ daily: 2_600 });
      assert.equal((await authorize(card.id, { amount: 1, ...at('2026-02-01T23:59:59.999Z') })).body.data.decline_reason, 'spending_limit_daily');
      assert.equal((await authorize(card.id, { amount: 1, ...at('2026-02-02T00:00:00.000Z') })).body.data.approved, true);
      await limits({ yearly: 5_101 });
      assert.equal((await authorize(card.id, { amount: 1, ...at('2026-12-31T23:59:59.999Z') })).body.data.decline_reason, 'spending_limit_yearly');
      assert.equal((await authorize(card.id, { amount: 1, ...at('2027-01-01T00:00:00.000Z') })).body.data.approved, true);
      await limits({ all_time: 5_102 });
      assert.equal((await authorize(card.id, { amount: 1, ...at('2030-01-01T00:00:00.000Z') })).body.data.decline_reason, 'spending_limit_all_time');
      assert.deepEqual(await limits({}), {});
      assert.equal((await authorize(card.id, { amount: 1, ...at('2030-01-01T00:00:00.000Z') })).body.data.approved, true);
    });

    it('keeps the daily purchase totals the windows read equal to the approved purchases, whoever writes them', async () => {
      await credit(10_000);
      const card = await activeCard({ amount: 5_000 });
      await eventually(async () => ((await getCard(card.id)).balance_amount === '5000' ? true : undefined), 'funding');
      assert.equal((await authorize(card.id, { amount: 7, occurred_at: '2026-05-01T23:59:59.999Z' })).body.data.approved, true);
      assert.equal((await authorize(card.id, { amount: 5, occurred_at: '2026-05-02T00:00:00.000Z' })).body.data.approved, true);
      const em = (await testOrm()).em.fork();
      // Written by hand, as a repair or a bulk load would: one approved, one declined, then changed and deleted.
      await em.execute(
        `insert into card_transactions (id, organization_id, environment, card_id, type, status, amount, balance_before, balance_after, fee_amount, created_at, updated_at)
         select gen_random_uuid(), c.organization_id, c.environment, c.id, 'purchase', r.status, r.amount, 0, 0, 0, '2026-05-01T12:00:00Z', now()
         from cards c, (values ('completed'::card_transaction_status, 11), ('declined'::card_transaction_status, 13)) as r(status, amount) where c.id = ?`,
        [card.id],
      );
      const days = async () =>
        Object.fromEntries(
          (await em.execute<{ day: string; amount: string }[]>(`select to_char(day, 'YYYY-MM-DD') as day, amount::text from card_daily_purchases where card_id = ? order by day`, [card.id])).map(
            (row) => [row.day, row.amount],
          ),
        );
      assert.deepEqual(await days(), { '2026-05-01': '18', '2026-05-02': '5' });
      await em.execute(`update card_transactions set status = 'completed' where card_id = ? and amount = 13`, [card.id]);
      await em.execute(`update card_transactions set status = 'declined' where card_id = ? and amount = 7`, [card.id]);
      assert.deepEqual(await days(), { '2026-05-01': '24', '2026-05-02': '5' });
      await em.execute(`delete from card_transactions where card_id = ? and amount = 5`, [card.id]);
      assert.deepEqual(await days(), { '2026-05-01': '24', '2026-05-02': '0' });
      // The windows read them: May holds 24 (the 11 and the 13 of the 1st), so a monthly limit of 25 takes 1 more on the 3rd, not 2.
      const limited = await app.request('PUT', `/api/cards/${card.id}/spend-limits`, { key: org.secret, body: { monthly: 25 } });
      assert.equal(limited.status, 200, limited.text);
      assert.equal((await authorize(card.id, { amount: 2, occurred_at: '2026-05-03T00:00:00.000Z' })).body.data.decline_reason, 'spending_limit_monthly');
      assert.equal((await authorize(card.id, { amount: 1, occurred_at: '2026-05-03T00:00:00.000Z' })).body.data.approved, true);
    });

    it('decides at every window edge alike on a card with 5,000 past approved purchases', async () => {
      await credit(100_000);
      const card = await activeCard({ amount: 50_000 });
      await eventually(async () => ((await getCard(card.id)).balance_amount === '50000' ? true : undefined), 'funding');
      // 1 cent every hour back from 2026-03-01T00:00Z (included) to 2025-08-05T09:00Z, with the card's all-time total.
      await (await testOrm()).em.fork().execute(
        `with history as (
           insert into card_transactions (id, organization_id, environment, card_id, type, status, amount, balance_before, balance_after, fee_amount, created_at, updated_at)
           select gen_random_uuid(), organization_id, environment, id, 'purchase', 'completed', 1, 0, 0, 0, '2026-03-01T00:00:00Z'::timestamptz - n * interval '1 hour', now()
           from cards, generate_series(0, 4999) as n where id = ?
           returning amount)
         update cards set spent_all_time = spent_all_time + (select sum(amount) from history) where id = ?`,
        [card.id, card.id],
      );
      /** Under `limit`, 2 cents at `at` are declined by that window and 1 cent is approved (the spent sum is exactly limit - 1). */
      const edge = async (limit: Record<string, number>, occurredAt: string) => {
        const response = await app.request('PUT', `/api/cards/${card.id}/spend-limits`, { key: org.secret, body: limit });
        assert.equal(response.status, 200, response.text);
        const declined = await authorize(card.id, { amount: 2, occurred_at: occurredAt });
        assert.equal(declined.body.data.decline_reason, `spending_limit_${Object.keys(limit)[0]}`, `${JSON.stringify(limit)} at ${occurredAt}`);
        const approved = await authorize(card.id, { amount: 1, occurred_at: occurredAt });
        assert.equal(approved.body.data.approved, true, `${JSON.stringify(limit)} at ${occurredAt}: ${approved.body.data.decline_reason}`);
      };
      const marchFirst = '2026-03-01T00:00:00.000Z';
      // The purchase at 00:00 opens the day; then 1 approved above it.
      await edge({ daily: 2 }, marchFirst);
      // The rolling week (2026-02-22T00:00Z excluded) holds 168 hourly purchases and the 1 approved at marchFirst.
      await edge({ weekly: 170 }, marchFirst);
      // The year includes the purchase exactly at 2026-01-01T00:00Z: 1417 hourly ones, and 2 approved at marchFirst.
      await edge({ yearly: 1_420 }, marchFirst);
      // The last instant of February: 672 hourly purchases from the one exactly at 2026-02-01T00:00Z; nothing at marchFirst counts.
      await edge({ monthly: 673 }, '2026-02-28T23:59:59.999Z');
      await edge({ daily: 26 }, '2026-02-28T23:59:59.999Z');
      // The year turn: 2025 holds 3583 hourly purchases; 2026 starts with the one at its first instant.
      await edge({ yearly: 3_584 }, '2025-12-31T23:59:59.999Z');
      await edge({ yearly: 2 }, '2026-01-01T00:00:00.000Z');
      // All time: the 5000 and the 7 approved since, whenever they happened.
      await edge({ all_time: 5_008 }, '2025-01-01T00:00:00.000Z');
      assert.equal((await authorize(card.id, { amount: 1, occurred_at: marchFirst })).body.data.decline_reason, 'spending_limit_all_time');
    });
  });

  describe('terminate', () => {
    it('refuses within 24 hours (409 with terminable_at), then returns the balance; a terminated card stays visible and cannot be reused', async () => {
      await credit(5_000);
      const card = await activeCard({ amount: 1_200 });
      await eventually(async () => ((await getCard(card.id)).balance_amount === '1200' ? true : undefined), 'funding');
      const early = await app.request('DELETE', `/api/cards/${card.id}`, { key: org.secret, body: { reason: 'lost' } });
      assert.equal(early.status, 409, early.text);
      assert.equal(early.body.error.code, 'card_termination_cooling_period');
      assert.equal(early.body.error.details.terminable_at, new Date(Date.parse(card.created_at) + 24 * HOUR).toISOString());
      // A refusal starts nothing and leaves the card as it was.
      assert.equal((await workflowStarts(org.organizationId)).has(`card-termination-${card.id}`), false);
      assert.equal((await getCard(card.id)).termination_workflow_id, null);

      await age(card.id, 24);
      const before = BigInt((await usdBalance()).available);
      const terminated = await app.request('DELETE', `/api/cards/${card.id}`, { key: org.secret, body: { reason: 'lost' } });
      assert.equal(terminated.status, 200, terminated.text);
      assert.equal(terminated.body.data.status, 'terminated');
      assert.equal(terminated.body.data.remaining_balance, '1200');
      assert.equal(terminated.body.data.balance_returned, true);
      assert.equal(terminated.body.data.reason, 'lost');
      assert.ok(terminated.body.data.terminated_at);
      assert.equal(terminated.body.data.workflow_id, `card-termination-${card.id}`);
      assert.equal(BigInt((await usdBalance()).available), before + 1_200n);

      const visible = await getCard(card.id);
      assert.equal(visible.status, 'terminated');
      assert.equal(visible.termination_workflow_id, `card-termination-${card.id}`);
      assert.equal(visible.balance_amount, '0');
      const listed = await app.request('GET', '/api/cards?status=terminated', { key: org.secret });
      assert.ok(listed.body.data.cards.some((entry: { id: string }) => entry.id === card.id));
      for (const [method, path, body] of [
        ['POST', `/api/cards/${card.id}/balance`, { type: 'fund', amount: 100, reference: `ref-${randomUUID()}` }],
        ['POST', `/api/cards/${card.id}/status`, { status: 'active' }],
        ['DELETE', `/api/cards/${card.id}`, {}],
      ] as const) {
        const response = await app.request(method, path, { key: org.secret, body });
        assert.equal(response.status, 409, `${method} ${path}`);
        assert.equal(response.body.error.code, 'invalid_state_transition');
      }
      await assertLedgerReconciles(org.organizationId);
    });

    it('refuses a card with a funding still settling, and a funding on a card being terminated', async () => {
      const own = await createTestOrganization('Terminating');
      await credit(10_000, own);
      const card = await activeCard({ amount: 1_000 }, own);
      await age(card.id, 25);
      // A funding accepted but not yet settled (its start recorded, not fired): termination must wait for it.
      const em = (await testOrm()).em.fork();
      await em.transactional((tx) => requestBalanceMove(tx, app.deps.config, { organizationId: own.organizationId, environment: 'sandbox', apiKeyId: own.apiKeyId, memberId: null }, card.id, { type: 'fund', amount: 500, reference: `ref-${randomUUID()}` }));
      const refused = await app.request('DELETE', `/api/cards/${card.id}`, { key: own.secret, body: {} });
      assert.equal(refused.status, 409, refused.text);
      assert.equal(refused.body.error.code, 'invalid_state_transition');
      assert.equal(await sweepStarts((await localTemporal()).client, taskQueue, own.organizationId), 1);
      await eventually(async () => ((await getCard(card.id, own)).balance_amount === '1500' ? true : undefined), 'settlement');
      const terminated = await app.request('DELETE', `/api/cards/${card.id}`, { key: own.secret, body: {} });
      assert.equal(terminated.status, 200, terminated.text);
      assert.equal(terminated.body.data.remaining_balance, '1500');
      const late = await app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'fund', amount: 1, reference: `ref-${randomUUID()}` } });
      assert.equal(late.status, 409);
      await assertLedgerReconciles(own.organizationId);
    });
  });

  describe('durable starts and money races', () => {
    it('answers POST /api/cards with Temporal down, and provisions the card once when the start sweep runs against Temporal', async function () {
      this.timeout(90_000);
      const own = await createTestOrganization('Temporal down');
      await credit(5_000, own);
      // An API whose Temporal connection goes nowhere: starts fail after their deadline and stay recorded.
      const deadConnection = Connection.lazy({ address: '127.0.0.1:1' });
      const deadApp = await startTestApp({
        config: { TEMPORAL_TASK_QUEUE: taskQueue, CARD_FUNDING_FEE_BPS: String(FEE_BPS) },
        temporal: { connection: deadConnection, client: new Client({ connection: deadConnection }) },
      });
      let cardId: string;
      try {
        const created = await deadApp.request('POST', '/api/cards', {
          key: own.secret,
          body: { amount: 1_000, card_type: 'virtual', currency: 'USD', name: 'Ada Lovelace', customer: validCustomer() },
        });
        assert.equal(created.status, 201, created.text);
        cardId = created.body.data.card.id;
        assert.equal(created.body.data.card.workflow_id, `card-provisioning-${cardId}`);
      } finally {
        await deadApp.close();
      }
      const start = (await workflowStarts(own.organizationId)).get(`card-provisioning-${cardId}`);
      assert.ok(start, 'the provisioning start is recorded');
      assert.equal(start.startedAt, null);
      assert.ok(start.attempts >= 1);
      assert.equal((await getCard(cardId, own)).status, 'pending');
      assert.equal((await usdBalance(own)).reserved, '1015');

      // Temporal is back: the sweep fires it, once.
      const client = (await localTemporal()).client;
      assert.equal(await sweepStarts(client, taskQueue, own.organizationId), 1);
      assert.equal(await sweepStarts(client, taskQueue, own.organizationId), 0);
      assert.deepEqual(await client.workflow.getHandle(`card-provisioning-${cardId}`).result(), { status: 'active' });
      const card = await getCard(cardId, own);
      assert.equal(card.status, 'active');
      assert.equal(card.balance_amount, '1000');
      const entries = await companyBalanceEntries(own.organizationId, { referenceType: 'card_transaction' });
      assert.deepEqual(entries.map((entry) => [entry.kind, entry.amount]).sort(), [
        ['capture', '1015'],
        ['reserve', '1015'],
      ]);
      await assertLedgerReconciles(own.organizationId);
    });

    it('answers DELETE with 202 and the terminating card when the workflow cannot finish in time; it terminates once started', async function () {
      this.timeout(90_000);
      const own = await createTestOrganization('Termination pending');
      await credit(5_000, own);
      const card = await activeCard({ amount: 1_000 }, own);
      // The card is active once provisioned; its initial funding settles in its own workflow, and a card with one still settling is not terminable.
      await eventually(async () => {
        const listed = (await app.request('GET', `/api/cards/${card.id}/transactions`, { key: own.secret })).body.data.transactions as { status: string }[];
        return listed.length > 0 && listed.every((transaction) => transaction.status !== 'pending') ? true : undefined;
      }, 'the initial funding to settle');
      await age(card.id, 25);
      const deadConnection = Connection.lazy({ address: '127.0.0.1:1' });
      const deadApp = await startTestApp({ config: { TEMPORAL_TASK_QUEUE: taskQueue }, temporal: { connection: deadConnection, client: new Client({ connection: deadConnection }) } });
      try {
        const accepted = await deadApp.request('DELETE', `/api/cards/${card.id}`, { key: own.secret, body: { reason: 'closing' } });
        assert.equal(accepted.status, 202, accepted.text);
        assert.equal(accepted.body.data.card.status, 'active');
        assert.equal(accepted.body.data.card.termination_workflow_id, `card-termination-${card.id}`);
        assert.ok(accepted.body.data.card.termination_requested_at);
        // A terminating card takes no more money.
        const fund = await app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'fund', amount: 100, reference: `ref-${randomUUID()}` } });
        assert.equal(fund.status, 409);
        assert.equal(fund.body.error.code, 'invalid_state_transition');
        const purchase = await app.request('POST', `/v1/sandbox/cards/${card.id}/authorizations`, { key: own.secret, body: { amount: 1 } });
        assert.equal(purchase.body.data.decline_reason, 'card_terminating');
      } finally {
        await deadApp.close();
      }
      const client = (await localTemporal()).client;
      assert.equal(await sweepStarts(client, taskQueue, own.organizationId), 1);
      const result = await client.workflow.getHandle(`card-termination-${card.id}`).result();
      assert.equal(result.status, 'terminated');
      assert.equal(result.remaining_balance, '1000');
      assert.equal(result.reason, 'closing');
      const repeat = await app.request('DELETE', `/api/cards/${card.id}`, { key: own.secret, body: {} });
      assert.equal(repeat.status, 409);
      assert.equal(BigInt((await usdBalance(own)).available), 5_000n - 1_015n + 1_000n);
      await assertLedgerReconciles(own.organizationId);
    });

    it('conserves money when termination races a funding, 50 times; nothing ends on a terminated card', async function () {
      this.timeout(240_000);
      const own = await createTestOrganization('Termination race');
      const credits = 50n * 5_000n;
      await credit(Number(credits), own);
      const cards: { id: string }[] = [];
      for (let batch = 0; batch < 5; batch += 1) {
        cards.push(...(await Promise.all(Array.from({ length: 10 }, () => activeCard({ amount: 2_000 }, own)))));
      }
      await eventually(async () => ((await usdBalance(own)).reserved === '0' ? true : undefined), 'initial fundings', 60_000);
      for (const card of cards) await age(card.id, 25);

      const outcomes: { cardId: string; terminate: number; fund: number }[] = [];
      for (let batch = 0; batch < 5; batch += 1) {
        outcomes.push(
          ...(await Promise.all(
            cards.slice(batch * 10, batch * 10 + 10).map(async (card) => {
              const [terminate, fund] = await Promise.all([
                app.request('DELETE', `/api/cards/${card.id}`, { key: own.secret, body: {} }),
                app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'fund', amount: 500, reference: `race-${card.id}` } }),
              ]);
              return { cardId: card.id, terminate: terminate.status, fund: fund.status };
            }),
          )),
        );
      }
      const em = (await testOrm()).em.fork();
      await eventually(async () => ((await em.fork().count(CardTransaction, { organization: own.organizationId, status: 'pending' })) === 0 ? true : undefined), 'settlements', 60_000);
      await eventually(async () => ((await em.fork().count(Card, { organization: own.organizationId, terminationRequestedAt: { $ne: null }, status: { $ne: 'terminated' } })) === 0 ? true : undefined), 'terminations', 60_000);

      for (const outcome of outcomes) {
        const card = await em.fork().findOneOrFail(Card, { id: outcome.cardId });
        const fundings = await em.fork().find(CardTransaction, { card: outcome.cardId, reference: `race-${outcome.cardId}` });
        assert.ok(fundings.every((funding) => funding.status === 'completed'));
        if (outcome.terminate === 409) {
          // The funding got in first and was still settling: the card stays, with it.
          assert.equal(outcome.fund, 200);
          assert.equal(card.status, 'active');
          assert.equal(card.balance, '2500');
          assert.equal(fundings.length, 1);
          continue;
        }
        assert.ok([200, 202].includes(outcome.terminate), JSON.stringify(outcome));
        assert.equal(card.status, 'terminated');
        assert.equal(card.balance, '0');
        assert.equal(card.held, '0');
        // Either the termination came first (the funding refused) or the funding had fully settled before it.
        assert.equal(outcome.fund === 200, fundings.length === 1, JSON.stringify(outcome));
        assert.ok(fundings.every((funding) => funding.updatedAt <= card.terminatedAt!));
        assert.equal(card.remainingBalance, String(2_000 + 500 * fundings.length));
      }
      const balance = await assertLedgerReconciles(own.organizationId);
      const all = await em.fork().find(Card, { organization: own.organizationId });
      const onCards = all.reduce((sum, card) => sum + BigInt(card.balance), 0n);
      const settled = await em.fork().find(CardTransaction, { organization: own.organizationId, status: 'completed', type: { $in: ['funding', 'withdrawal'] } });
      const fees = settled.reduce((sum, transaction) => sum + BigInt(transaction.feeAmount), 0n);
      assert.equal(balance.usd.available + balance.usd.reserved + onCards + fees, credits);
    });

    it('accepts exactly 10 of 20 concurrent fundings with different references against a balance that covers 10, to the cent', async () => {
      const own = await createTestOrganization('Ten of twenty');
      const card = await activeCard({}, own);
      await credit(10 * 1_015, own);
      const responses = await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'fund', amount: 1_000, reference: `twenty-${index}` } }),
        ),
      );
      const accepted = responses.filter((response) => response.status === 200);
      assert.equal(accepted.length, 10, responses.map((response) => response.text).join('\n'));
      assert.ok(responses.filter((response) => response.status !== 200).every((response) => response.status === 400 && response.body.error.code === 'insufficient_funds'));
      for (const response of accepted) {
        const settledTx = await eventually(async () => {
          const tx = (await (await testOrm()).em.fork().findOneOrFail(CardTransaction, { id: response.body.data.transaction.id }));
          return tx.status === 'pending' ? undefined : tx;
        }, 'settlement');
        assert.equal(settledTx.status, 'completed');
      }
      assert.equal((await getCard(card.id, own)).balance_amount, '10000');
      const balance = await usdBalance(own);
      assert.deepEqual([balance.available, balance.reserved], ['0', '0']);
      await assertLedgerReconciles(own.organizationId);
    });

    it('leaves the company balance untouched by a withdrawal the issuer declines, entry by entry', async () => {
      const own = await createTestOrganization('Declined withdrawal');
      await credit(5_000, own);
      const card = await activeCard({ amount: 1_000 }, own);
      await eventually(async () => ((await getCard(card.id, own)).balance_amount === '1000' ? true : undefined), 'funding');
      const withdrawn = await app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'withdraw', amount: 13, reference: `ref-${randomUUID()}` } });
      assert.equal(withdrawn.status, 200, withdrawn.text);
      const transactionId = withdrawn.body.data.transaction.id as string;
      assert.equal(withdrawn.body.data.transaction.workflow_id, `card-balance-${transactionId}`);
      const em = (await testOrm()).em.fork();
      const failed = await eventually(async () => {
        const tx = await em.fork().findOneOrFail(CardTransaction, { id: transactionId });
        return tx.status === 'pending' ? undefined : tx;
      }, 'settlement');
      assert.equal(failed.status, 'failed');
      assert.equal(failed.failureReason, 'issuer_declined');
      assert.equal(failed.balanceBefore, '1000');
      assert.equal(failed.balanceAfter, '1000');
      const after = await em.fork().findOneOrFail(Card, { id: card.id });
      assert.equal(after.balance, '1000');
      assert.equal(after.held, '0');
      const initialFunding = await em.fork().findOneOrFail(CardTransaction, { card: card.id, type: 'funding' });
      const entries = await companyBalanceEntries(own.organizationId);
      assert.deepEqual(
        entries.map((entry) => [entry.kind, entry.amount, entry.referenceType, entry.referenceId === initialFunding.id ? 'initial funding' : entry.referenceId === transactionId ? 'withdrawal' : 'other']),
        [
          ['credit', '5000', 'sandbox_credit', 'other'],
          ['reserve', '1015', 'card_transaction', 'initial funding'],
          ['capture', '1015', 'card_transaction', 'initial funding'],
        ],
      );
      const balance = await assertLedgerReconciles(own.organizationId);
      assert.deepEqual(balance.usd, { available: 5_000n - 1_015n, reserved: 0n });
    });
  });

  describe('sandbox and live apart', () => {
    it("keeps one organization's sandbox and live cards, customers and transactions out of the other key's reach", async function () {
      this.timeout(120_000);
      needStripeMock(this, stripeMock);
      const own = await createTestOrganization('Two worlds');
      const liveKey = await own.key(['*'], 'live');
      const live: TestOrganization = { ...own, secret: liveKey.secret };
      const em = (await testOrm()).em.fork();
      const cardsIn = (environment: 'sandbox' | 'live') => em.fork().count(Card, { organization: own.organizationId, environment });

      // Sandbox credits fund sandbox cards only: a live card with an initial amount is refused, nothing created.
      await credit(10_000, own);
      const unfunded = await createCard({ amount: 1_000 }, live);
      assert.equal(unfunded.status, 400, unfunded.text);
      assert.equal(unfunded.body.error.code, 'insufficient_funds');
      assert.equal(await cardsIn('live'), 0);
      assert.ok(!(await app.request('GET', '/v1/balances', { key: live.secret })).body.data.some((balance: { available: string }) => balance.available !== '0'));

      // One cardholder identity, one customer per environment.
      const customer = validCustomer();
      const sandboxCard = await activeCard({ amount: 2_000, customer }, own);
      const liveCard = await activeCard({ customer, name: 'Live Lovelace' }, live);
      assert.notEqual(sandboxCard.customer_id, liveCard.customer_id);
      await eventually(async () => ((await getCard(sandboxCard.id, own)).balance_amount === '2000' ? true : undefined), 'initial funding');
      const funded = await app.request('POST', `/api/cards/${sandboxCard.id}/balance`, { key: own.secret, body: { type: 'fund', amount: 300, reference: `two-${randomUUID()}` } });
      assert.equal(funded.status, 200, funded.text);
      await eventually(async () => ((await getCard(sandboxCard.id, own)).balance_amount === '2300' ? true : undefined), 'funding');
      const purchase = await app.request('POST', `/v1/sandbox/cards/${sandboxCard.id}/authorizations`, { key: own.secret, body: { amount: 100 } });
      assert.equal(purchase.body.data.approved, true, purchase.text);
      await age(sandboxCard.id, 25);
      await age(liveCard.id, 25);

      const attempts = (card: { id: string; customer_id: string }) => [
        ['GET', `/api/cards/${card.id}`, undefined],
        ['GET', `/api/cards/${card.id}/secure`, undefined],
        ['GET', `/api/cards/${card.id}/transactions`, undefined],
        ['POST', `/api/cards/${card.id}/balance`, { type: 'fund', amount: 1, reference: `x-${randomUUID()}` }],
        ['POST', `/api/cards/${card.id}/balance`, { type: 'withdraw', amount: 1, reference: `x-${randomUUID()}` }],
        ['POST', `/api/cards/${card.id}/status`, { status: 'frozen' }],
        ['PUT', `/api/cards/${card.id}/spend-limits`, { transaction: 1 }],
        ['DELETE', `/api/cards/${card.id}`, {}],
        ['POST', `/api/cards/${card.id}/fund`, { amount: 1, reference: `x-${randomUUID()}` }],
        ['POST', `/api/cards/${card.id}/withdraw`, { amount: 1, reference: `x-${randomUUID()}` }],
        ['POST', `/api/cards/${card.id}/freeze`, undefined],
        ['POST', `/api/cards/${card.id}/unfreeze`, undefined],
        ['POST', `/api/cards/${card.id}/terminate`, {}],
        ['GET', `/api/customers/${card.customer_id}`, undefined],
        ['GET', `/api/customers/${card.customer_id}/cards`, undefined],
      ] as const;
      for (const [caller, card] of [
        [own, liveCard],
        [live, sandboxCard],
      ] as const) {
        for (const [method, path, body] of attempts(card)) {
          const response = await app.request(method, path, { key: caller.secret, ...(body === undefined ? {} : { body }) });
          assert.equal(response.status, 404, `${method} ${path}: ${response.text}`);
          assert.equal(response.body.error.code, 'resource_missing', `${method} ${path}`);
        }
        const listed = await app.request('GET', '/api/cards?limit=100', { key: caller.secret });
        assert.ok(!listed.body.data.cards.some((listedCard: { id: string }) => listedCard.id === card.id));
        const searched = await app.request('GET', `/api/cards?search=${card.last_four}`, { key: caller.secret });
        assert.ok(!searched.body.data.cards.some((listedCard: { id: string }) => listedCard.id === card.id));
        const byName = await app.request('GET', '/api/cards?search=Lovelace', { key: caller.secret });
        assert.equal(byName.body.data.cards.length, 1);
      }
      // The sandbox authorization helper never reaches a live card; a live key has no sandbox helper at all.
      const onLive = await app.request('POST', `/v1/sandbox/cards/${liveCard.id}/authorizations`, { key: own.secret, body: { amount: 1 } });
      assert.equal(onLive.status, 404, onLive.text);
      assert.equal(onLive.body.error.code, 'resource_missing');
      assert.equal((await app.request('POST', `/v1/sandbox/cards/${sandboxCard.id}/authorizations`, { key: live.secret, body: { amount: 1 } })).status, 404);

      // Nothing the other environment attempted changed anything; each key still reaches its own.
      const sandboxAfter = await getCard(sandboxCard.id, own);
      const liveAfter = await getCard(liveCard.id, live);
      assert.deepEqual([sandboxAfter.status, sandboxAfter.balance_amount, sandboxAfter.spending_limits, sandboxAfter.termination_requested_at], ['active', '2200', {}, null]);
      assert.deepEqual([liveAfter.status, liveAfter.balance_amount, liveAfter.spending_limits, liveAfter.termination_requested_at], ['active', '0', {}, null]);
      const liveTransactions = await app.request('GET', `/api/cards/${liveCard.id}/transactions`, { key: live.secret });
      assert.deepEqual(liveTransactions.body.data.transactions, []);
      assert.equal((await app.request('GET', `/api/cards/${sandboxCard.id}/transactions`, { key: own.secret })).body.data.transactions.length, 3);
      // Stripe keeps a live card's number (stripe-mock hands none over): the live key reaches the card, which has none here.
      const liveSecure = await app.request('GET', `/api/cards/${liveCard.id}/secure`, { key: live.secret });
      assert.equal(liveSecure.status, 409, liveSecure.text);
      const liveCustomerCards = await app.request('GET', `/api/customers/${liveCard.customer_id}/cards`, { key: live.secret });
      assert.deepEqual(liveCustomerCards.body.cards.map((entry: { id: string }) => entry.id), [liveCard.id]);
      const rows = await em.fork().find(CardTransaction, { card: { $in: [sandboxCard.id, liveCard.id] } }, { populate: ['card'] });
      assert.ok(rows.every((row) => row.environment === row.card.environment));
      assert.equal(await cardsIn('live'), 1);
      await assertLedgerReconciles(own.organizationId, 'sandbox');
      const liveBalances = await assertLedgerReconciles(own.organizationId, 'live');
      assert.deepEqual(liveBalances.usd, { available: 0n, reserved: 0n });
    });
  });

  describe('bad input', () => {
    it('answers 400 for card_limits with three decimals and other impossible limits, creating nothing', async () => {
      const own = await createTestOrganization('Bad limits');
      await credit(10_000, own);
      const cases: [unknown, string][] = [
        [{ daily: '10.123' }, 'card_limits.daily'],
        [{ single_transaction: '0.001' }, 'card_limits.single_transaction'],
        [{ monthly: '250.0000' }, 'card_limits.monthly'],
        [{ weekly: '0' }, 'card_limits.weekly'],
        [{ yearly: '-5.00' }, 'card_limits.yearly'],
        [{ all_time: '1e5' }, 'card_limits.all_time'],
        [{ all_time: '9'.repeat(41) }, 'card_limits.all_time'],
        [{ all_time: '10000000000000.00' }, 'card_limits.all_time'],
        [{ monthly: '' }, 'card_limits.monthly'],
        [{ daily: 100 }, 'card_limits.daily'],
      ];
      for (const [cardLimits, param] of cases) {
        const response = await createCard({ amount: 1_000, card_limits: cardLimits }, own);
        assert.equal(response.status, 400, `${JSON.stringify(cardLimits)}: ${response.text}`);
        assert.equal(response.body.error.code, 'validation_failed');
        assert.equal(response.body.error.param, param, JSON.stringify(cardLimits));
      }
      const em = (await testOrm()).em.fork();
      assert.equal(await em.count(Card, { organization: own.organizationId }), 0);
      assert.equal((await usdBalance(own)).available, '10000');
      // The cap is the one the document's pattern states: 13 digits of dollars.
      const ok = await createCard({ card_limits: { all_time: '9999999999999.99', daily: '10.5' } }, own);
      assert.equal(ok.status, 201, ok.text);
      assert.deepEqual(ok.body.data.card.spending_limits, { daily: '1050', all_time: '999999999999999' });
      await assertLedgerReconciles(own.organizationId);
    });

    it('answers 400 for impossible amounts on every card route (huge, negative, fractional, strings, dates out of range), changing nothing', async () => {
      const own = await createTestOrganization('Bad amounts');
      await credit(10_000, own);
      const card = await activeCard({ amount: 1_000 }, own);
      await eventually(async () => ((await getCard(card.id, own)).balance_amount === '1000' ? true : undefined), 'funding');
      const before = await usdBalance(own);
      const amounts: unknown[] = [-1, 1.5, 0.001, 1e20, 2 ** 53, '100', '1'.repeat(41), null, true, { value: 1 }];
      for (const amount of amounts) {
        const label = JSON.stringify(amount);
        const checks = [
          await createCard({ amount }, own),
          await app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'fund', amount, reference: `bad-${randomUUID()}` } }),
          await app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'withdraw', amount, reference: `bad-${randomUUID()}` } }),
          await app.request('POST', `/api/cards/${card.id}/fund`, { key: own.secret, body: { amount, reference: `bad-${randomUUID()}` } }),
          await app.request('POST', `/v1/sandbox/cards/${card.id}/authorizations`, { key: own.secret, body: { amount } }),
          // null clears a spend limit: a valid value there.
          ...(amount === null ? [] : [await app.request('PUT', `/api/cards/${card.id}/spend-limits`, { key: own.secret, body: { daily: amount } })]),
        ];
        for (const response of checks) {
          assert.equal(response.status, 400, `${label}: ${response.text}`);
          assert.equal(response.body.error.code, 'validation_failed', label);
          assert.ok(['amount', 'daily'].includes(response.body.error.param), `${label}: ${response.body.error.param}`);
        }
      }
      for (const occurredAt of ['-271821-04-20T00:00:00.000Z', '+275760-09-13T00:00:00.000Z', '1969-12-31T23:59:59.999Z', 'yesterday', 'x'.repeat(100)]) {
        const response = await app.request('POST', `/v1/sandbox/cards/${card.id}/authorizations`, { key: own.secret, body: { amount: 1, occurred_at: occurredAt } });
        assert.equal(response.status, 400, `${occurredAt}: ${response.text}`);
        assert.equal(response.body.error.param, 'occurred_at');
      }
      // A fund far beyond the company balance and a purchase far beyond the card are refusals, not failures.
      const huge = Number.MAX_SAFE_INTEGER;
      const fund = await app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'fund', amount: huge, reference: `huge-${randomUUID()}` } });
      assert.equal(fund.status, 400);
      assert.equal(fund.body.error.code, 'insufficient_funds');
      const withdraw = await app.request('POST', `/api/cards/${card.id}/balance`, { key: own.secret, body: { type: 'withdraw', amount: huge, reference: `huge-${randomUUID()}` } });
      assert.equal(withdraw.body.error.code, 'insufficient_funds');
      const purchase = await app.request('POST', `/v1/sandbox/cards/${card.id}/authorizations`, { key: own.secret, body: { amount: huge } });
      assert.equal(purchase.body.data.decline_reason, 'insufficient_funds', purchase.text);
      const limits = await app.request('PUT', `/api/cards/${card.id}/spend-limits`, { key: own.secret, body: { all_time: huge } });
      assert.equal(limits.status, 200, limits.text);

      const em = (await testOrm()).em.fork();
      assert.equal(await em.count(Card, { organization: own.organizationId }), 1);
      assert.equal(await em.count(CardTransaction, { organization: own.organizationId, type: { $ne: 'purchase' } }), 1);
      assert.equal((await getCard(card.id, own)).balance_amount, '1000');
      assert.deepEqual(await usdBalance(own), before);
      await assertLedgerReconciles(own.organizationId);
    });

    it('answers 409 idempotency_key_reused for a reference reused with another card, type or amount, moving no money', async () => {
      const own = await createTestOrganization('Reused reference');
      await credit(10_000, own);
      const first = await activeCard({}, own);
      const second = await activeCard({}, own);
      const reference = `reused-${randomUUID()}`;
      const move = (cardId: string, body: Record<string, unknown>) => app.request('POST', `/api/cards/${cardId}/balance`, { key: own.secret, body: { reference, ...body } });
      const original = await move(first.id, { type: 'fund', amount: 500 });
      assert.equal(original.status, 200, original.text);
      const transactionId = original.body.data.transaction.id as string;
      await eventually(async () => ((await getCard(first.id, own)).balance_amount === '500' ? true : undefined), 'funding');
      const after = await usdBalance(own);
      for (const [cardId, body] of [
        [first.id, { type: 'fund', amount: 501 }],
        [first.id, { type: 'withdraw', amount: 500 }],
        [second.id, { type: 'fund', amount: 500 }],
        [second.id, { type: 'withdraw', amount: 1 }],
      ] as const) {
        const response = await move(cardId, body);
        assert.equal(response.status, 409, `${JSON.stringify(body)}: ${response.text}`);
        assert.equal(response.body.error.code, 'idempotency_key_reused');
        assert.equal(response.body.error.type, 'idempotency_error');
        assert.equal(response.body.error.param, 'reference');
      }
      const alias = await app.request('POST', `/api/cards/${first.id}/withdraw`, { key: own.secret, body: { amount: 500, reference } });
      assert.equal(alias.status, 409);
      // The same request again is the original, settled; nothing moved twice.
      const repeat = await move(first.id, { type: 'fund', amount: 500 });
      assert.equal(repeat.status, 200);
      assert.equal(repeat.body.data.transaction.id, transactionId);
      assert.equal(repeat.body.data.transaction.status, 'completed');
      assert.deepEqual(await usdBalance(own), after);
      assert.equal((await getCard(first.id, own)).balance_amount, '500');
      assert.equal((await getCard(second.id, own)).balance_amount, '0');
      const em = (await testOrm()).em.fork();
      assert.equal(await em.count(CardTransaction, { organization: own.organizationId, reference }), 1);

      // One new reference raced on two cards: one transaction, the same card's repeats get it, the other card 409, never a 500.
      const raced = `raced-${randomUUID()}`;
      const racing = await Promise.all(
        Array.from({ length: 20 }, (_, index) =>
          app.request('POST', `/api/cards/${(index % 2 === 0 ? first : second).id}/balance`, { key: own.secret, body: { type: 'fund', amount: 100, reference: raced } }),
        ),
      );
      const statuses = new Set(racing.map((response) => response.status));
      assert.ok([...statuses].every((status) => status === 200 || status === 409), racing.map((response) => response.text).join('\n'));
      const winners = racing.filter((response) => response.status === 200);
      assert.equal(winners.length, 10);
      assert.equal(new Set(winners.map((response) => response.body.data.transaction.id)).size, 1);
      await eventually(async () => ((await em.fork().count(CardTransaction, { organization: own.organizationId, status: 'pending' })) === 0 ? true : undefined), 'settlement');
      assert.equal(await em.fork().count(CardTransaction, { organization: own.organizationId, reference: raced }), 1);
      await assertLedgerReconciles(own.organizationId);
    });

    it('creates one customer for concurrent cards of one new cardholder', async () => {
      const own = await createTestOrganization('One cardholder');
      const customer = validCustomer();
      const responses = await Promise.all(Array.from({ length: 10 }, () => createCard({ customer }, own)));
      assert.ok(responses.every((response) => response.status === 201), responses.map((response) => response.text).join('\n'));
      assert.equal(new Set(responses.map((response) => response.body.data.card.customer_id)).size, 1);
      assert.equal(await (await testOrm()).em.fork().count(Customer, { organization: own.organizationId }), 1);
    });

    it("checks a card's webhook_url at creation with the webhook URL policy of the key's environment, creating nothing when refused", async () => {
      const own = await createTestOrganization('Card webhook policy');
      const live: TestOrganization = { ...own, secret: (await own.key(['*'], 'live')).secret };
      const refused: [TestOrganization, string][] = [
        [own, 'http://10.0.0.1/hook'],
        [own, 'https://192.168.1.10/hook'],
        [own, 'https://169.254.169.254/latest'],
        [own, 'https://[::ffff:10.0.0.1]/hook'],
        [own, 'https://[64:ff9b::a00:1]/hook'],
        [own, 'ftp://127.0.0.1/hook'],
        [own, 'https://user:pass@127.0.0.1/hook'],
        [live, 'http://127.0.0.1:8080/hook'],
        [live, 'https://127.0.0.1/hook'],
        [live, 'https://localhost/hook'],
        [live, 'http://example.com/hook'],
      ];
      for (const [caller, url] of refused) {
        const response = await createCard({ webhook_url: url }, caller);
        assert.equal(response.status, 400, `${url}: ${response.text}`);
        assert.equal(response.body.error.code, 'validation_failed');
        assert.equal(response.body.error.param, 'webhook_url');
      }
      const em = (await testOrm()).em.fork();
      assert.equal(await em.count(Card, { organization: own.organizationId }), 0);
      assert.equal(await em.count(Customer, { organization: own.organizationId }), 0);
      // Sandbox may use a loopback receiver (WEBHOOK_ALLOW_INSECURE_LOOPBACK, set in the test configuration).
      const receiver = await new WebhookReceiver().start();
      try {
        const loopback = await createCard({ webhook_url: receiver.url }, own);
        assert.equal(loopback.status, 201, loopback.text);
        assert.equal(loopback.body.data.card.webhook_url, receiver.url);
      } finally {
        await receiver.close();
      }
    });
  });

  describe('lists, tenancy, legacy and deprecated routes', () => {
    it('lists with filters, search by last four or cardholder name and cursor pages', async () => {
      const other = await createTestOrganization('Lists');
      const first = await activeCard({ name: 'Grace Hopper', card_type: 'physical' }, other);
      await activeCard({ name: 'Alan Turing' }, other);
      await activeCard({ name: 'Alan Kay' }, other);
      const list = (query: string) => app.request('GET', `/api/cards${query}`, { key: other.secret });
      const page1 = await list('?limit=2');
      assert.equal(page1.body.data.cards.length, 2);
      assert.deepEqual({ ...page1.body.data.page_info, next_cursor: undefined }, { has_more: true, limit: 2, next_cursor: undefined });
      const page2 = await list(`?limit=2&cursor=${page1.body.data.page_info.next_cursor}`);
      assert.equal(page2.body.data.cards.length, 1);
      assert.equal(page2.body.data.page_info.has_more, false);
      assert.equal(page2.body.data.cards[0].id, first.id);
      assert.equal((await list('?search=alan')).body.data.cards.length, 2);
      assert.equal((await list(`?search=${first.last_four}`)).body.data.cards[0].id, first.id);
      assert.equal((await list('?card_type=physical')).body.data.cards.length, 1);
      assert.equal((await list('?limit=101')).status, 400);
      assert.equal((await list('?limit=0')).status, 400);
    });

    it("answers 404 for another company's card and customer and for malformed ids", async () => {
      const card = await activeCard();
      const stranger = await createTestOrganization('Stranger');
      for (const path of [`/api/cards/${card.id}`, `/api/cards/${card.id}/secure`, `/api/cards/${card.id}/transactions`, `/api/customers/${card.customer_id}`, '/api/cards/not-a-uuid']) {
        const response = await app.request('GET', path, { key: stranger.secret });
        assert.equal(response.status, 404, path);
        assert.equal(response.body.error.code, 'resource_missing');
      }
      const fund = await app.request('POST', `/api/cards/${card.id}/balance`, { key: stranger.secret, body: { type: 'fund', amount: 1, reference: 'x' } });
      assert.equal(fund.status, 404);
      const auth = await app.request('POST', `/v1/sandbox/cards/${card.id}/authorizations`, { key: stranger.secret, body: { amount: 1 } });
      assert.equal(auth.status, 404);
    });

    it('answers 410 on /api/virtualcards naming the new route, and serves the deprecated v2 aliases with Deprecation and Link', async () => {
      const legacy = await app.request('POST', '/api/virtualcards/123/topup', { key: org.secret, body: {} });
      assert.equal(legacy.status, 410);
      assert.match(legacy.body.error.message, /POST \/api\/cards\/:cardId\/balance/);
      // Any method on any path under /api/virtualcards, with or without a key or a readable body.
      const cases: [string, string, string][] = [
        ['PUT', '/api/virtualcards/123/topup', 'POST /api/cards/:cardId/balance (type fund)'],
        ['DELETE', '/api/virtualcards/123/freeze', 'POST /api/cards/:cardId/status (status frozen)'],
        ['PATCH', '/api/virtualcards', 'POST /api/cards'],
        ['DELETE', '/api/virtualcards', 'POST /api/cards'],
        ['PUT', '/api/virtualcards/123', 'GET /api/cards/:cardId'],
        ['GET', '/api/virtualcards/123/details', 'GET /api/cards/:cardId/secure'],
        ['GET', '/api/virtualcards/anything/else', 'POST /api/cards (create) or GET /api/cards (list)'],
        ['DELETE', '/api/virtualcards/anything/else/too', 'POST /api/cards (create) or GET /api/cards (list)'],
        ['OPTIONS', '/api/virtualcards/123/withdraw', 'POST /api/cards/:cardId/balance (type withdraw)'],
        ['POST', '/api/virtualcards/', 'POST /api/cards'],
      ];
      for (const [method, path, successor] of cases) {
        const response = await app.request(method, path, { key: org.secret });
        assert.equal(response.status, 410, `${method} ${path}: ${response.text}`);
        assert.equal(response.body.error.code, 'endpoint_removed');
        assert.equal(response.body.error.type, 'invalid_request_error');
        assert.ok(response.body.error.message.includes(successor), `${method} ${path}: ${response.body.error.message}`);
        assert.ok(response.body.error.details.successor.startsWith(successor), `${method} ${path}`);
        assert.ok(response.body.error.request_id);
      }
      const unauthenticated = await app.request('POST', '/api/virtualcards/1/unfreeze', { rawBody: '{not json', headers: { 'content-type': 'text/plain' } });
      assert.equal(unauthenticated.status, 410, unauthenticated.text);
      assert.equal((await app.request('HEAD', '/api/virtualcards/x/y')).status, 410);

      await credit(1_000);
      const card = await activeCard();
      const freeze = await app.request('POST', `/api/cards/${card.id}/freeze`, { key: org.secret });
      assert.equal(freeze.status, 200, freeze.text);
      assert.equal(freeze.headers.get('deprecation'), 'true');
      assert.equal(freeze.headers.get('link'), `</api/cards/${card.id}/status>; rel="successor-version"`);
      assert.equal((await getCard(card.id)).status, 'frozen');
      await app.request('POST', `/api/cards/${card.id}/unfreeze`, { key: org.secret });
      const fund = await app.request('POST', `/api/cards/${card.id}/fund`, { key: org.secret, body: { amount: 100, reference: `ref-${randomUUID()}` } });
      assert.equal(fund.status, 200, fund.text);
      assert.equal(fund.body.data.transaction.type, 'funding');
      assert.equal(fund.headers.get('link'), `</api/cards/${card.id}/balance>; rel="successor-version"`);
      await settled(card.id, fund.body.data.transaction.id);
      const terminate = await app.request('POST', `/api/cards/${card.id}/terminate`, { key: org.secret, body: {} });
      assert.equal(terminate.body.error.code, 'card_termination_cooling_period');
    });
  });
});
