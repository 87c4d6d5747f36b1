import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Card } from '../../src/cards/entities';
import { cardBalanceProjection } from '../../src/cards/ledger';
import { verifyLedger } from '../../src/ledger/invariants';
import { ledgerProjections } from '../../src/registries';
import { createTestOrganization, type TestApp, type TestOrganization } from '../support/app';
import { validCustomer } from '../support/cards';
import { cli } from '../support/cli';
import { testOrm } from '../support/environment';
import { eventually } from '../support/eventually';
import { assertLedgerReconciles, cardPostings, type PostingRead } from '../support/ledger';
import { startAppWithWorker } from '../support/worker';

const FEE_BPS = 150;
const HOUR = 3600_000;

/** A card's money as ledger postings (docs/ledger.md "Cards"): each step posted once, line by line, the card row their sum. */
describe("Cards in the double-entry ledger", () => {
  let app: TestApp;
  let stop: () => Promise<void>;

  before(async () => {
    ({ app, stop } = await startAppWithWorker({ CARD_FUNDING_FEE_BPS: String(FEE_BPS) }));
  });
  after(async () => {
    await stop?.();
  });

  const getCard = async (org: TestOrganization, cardId: string) => (await app.request('GET', `/api/cards/${cardId}`, { key: org.secret })).body.data.card;
  const fundedCard = async (org: TestOrganization, amount: number) => {
    const created = await app.request('POST', '/api/cards', {
      key: org.secret,
      body: { amount, card_type: 'virtual', currency: 'USD', name: 'Grace Hopper', customer: validCustomer() },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.body.data.card.id as string;
    await eventually(async () => ((await getCard(org, id)).balance_amount === String(amount) ? true : undefined), 'the card to be active and funded');
    return { id, organizationId: org.organizationId };
  };
  const settledMove = async (org: TestOrganization, cardId: string, body: Record<string, unknown>) => {
    const moved = await app.request('POST', `/api/cards/${cardId}/balance`, { key: org.secret, body: { reference: `ref-${randomUUID()}`, ...body } });
    assert.equal(moved.status, 200, moved.text);
    const id = moved.body.data.transaction.id as string;
    return eventually(async () => {
      const listed = (await app.request('GET', `/api/cards/${cardId}/transactions`, { key: org.secret })).body.data.transactions as { id: string; status: string }[];
      return listed.find((tx) => tx.id === id && tx.status !== 'pending');
    }, 'settlement');
  };
  /**
   * Reads the card's postings step by step: each call checks the ledger whole for the organization
   * (what ledger:verify checks) and the earlier postings unchanged, and returns the postings made since the last call.
   */
  const postingsOf = (card: { id: string; organizationId: string }) => {
    const seen: PostingRead[] = [];
    return async () => {
      assert.deepEqual(await verifyLedger((await testOrm()).em.fork(), ledgerProjections, card.organizationId), []);
      const all = await cardPostings(card);
      assert.deepEqual(all.slice(0, seen.length), seen, 'earlier postings stay as they were');
      const made = all.slice(seen.length);
      seen.push(...made);
      return made;
    };
  };

  /** A funding's settlement: the company's reserve straight to the card, the fee to card_fees; nothing through card_issuer. */
  const fundingPosting = (amount: number, fee: number): PostingRead => ({
    kind: 'capture',
    lines: [
      ['card:card:usd:available', String(amount)],
      ['card_fees:org:sandbox:usd', String(fee)],
      ['company:org:sandbox:usd:reserved', String(-(amount + fee))],
    ],
  });

  it('posts a funding, purchases, withdrawals and the termination from and to the card, each once, line by line', async () => {
    const org = await createTestOrganization('Card ledger');
    await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: { currency: 'usd', amount: '50000' } });
    const card = await fundedCard(org, 10_000);
    const next = postingsOf(card);

    assert.deepEqual(await next(), [fundingPosting(10_000, 150)]);

    const approved = await app.request('POST', `/v1/sandbox/cards/${card.id}/authorizations`, { key: org.secret, body: { amount: 2_500, merchant_name: 'Corner Coffee' } });
    assert.equal(approved.body.data.approved, true, approved.text);
    const declined = await app.request('POST', `/v1/sandbox/cards/${card.id}/authorizations`, { key: org.secret, body: { amount: 1_000_000 } });
    assert.equal(declined.body.data.approved, false, declined.text);
    // The merchant is paid through the issuer; a decline posts nothing.
    assert.deepEqual(await next(), [
      {
        kind: 'purchase',
        lines: [
          ['card:card:usd:available', '-2500'],
          ['card_issuer:org:sandbox:usd', '2500'],
        ],
      },
    ]);

    assert.equal((await settledMove(org, card.id, { type: 'withdraw', amount: 3_000 })).status, 'completed');
    // Held at the request, then from the hold to the company, less the fee.
    assert.deepEqual(await next(), [
      {
        kind: 'hold',
        lines: [
          ['card:card:usd:available', '-3000'],
          ['card:card:usd:held', '3000'],
        ],
      },
      {
        kind: 'credit',
        lines: [
          ['card:card:usd:held', '-3000'],
          ['card_fees:org:sandbox:usd', '45'],
          ['company:org:sandbox:usd:available', '2955'],
        ],
      },
    ]);

    // A withdrawal the issuer declines: held, then released; the company balance never moves.
    assert.equal((await settledMove(org, card.id, { type: 'withdraw', amount: 13 })).status, 'failed');
    assert.deepEqual(await next(), [
      { kind: 'hold', lines: [['card:card:usd:available', '-13'], ['card:card:usd:held', '13']] },
      { kind: 'release', lines: [['card:card:usd:available', '13'], ['card:card:usd:held', '-13']] },
    ]);

    assert.equal((await settledMove(org, card.id, { type: 'fund', amount: 1_000 })).status, 'completed');
    assert.deepEqual(await next(), [fundingPosting(1_000, 15)]);

    await (await testOrm()).em.fork().nativeUpdate(Card, { id: card.id }, { createdAt: new Date(Date.now() - 25 * HOUR) });
    const terminated = await app.request('DELETE', `/api/cards/${card.id}`, { key: org.secret, body: { reason: 'lost' } });
    assert.equal(terminated.status, 200, terminated.text);
    assert.equal(terminated.body.data.remaining_balance, '5500');
    // What is left goes back from the card to the company balance in one posting.
    assert.deepEqual(await next(), [
      {
        kind: 'credit',
        lines: [
          ['card:card:usd:available', '-5500'],
          ['company:org:sandbox:usd:available', '5500'],
        ],
      },
    ]);
    assert.equal((await getCard(org, card.id)).balance_amount, '0');
    const [sums] = await (await testOrm()).em.fork().execute<{ available: string; held: string }[]>(
      `select coalesce(sum(l.amount) filter (where a.type = 'card_available'), 0)::text as available, coalesce(sum(l.amount) filter (where a.type = 'card_held'), 0)::text as held
         from ledger_lines l join ledger_accounts a on a.key = l.account_key where a.holder_id = ?`,
      [card.id],
    );
    assert.deepEqual(sums, { available: '0', held: '0' });
    const balances = await assertLedgerReconciles(org.organizationId);
    assert.deepEqual(balances.usd, { available: 50_000n - 10_150n + 2_955n - 1_015n + 5_500n, reserved: 0n });
  });

  it("finds a card's balance or hold changed behind the service: ledger:verify exits 1 naming the card with both figures", async () => {
    const org = await createTestOrganization('Card changed behind the ledger');
    await app.request('POST', '/v1/sandbox/balances', { key: org.secret, body: { currency: 'usd', amount: '5000' } });
    const card = await fundedCard(org, 1_000);
    const em = (await testOrm()).em.fork();
    assert.deepEqual(await cardBalanceProjection.breaks(em, org.organizationId), []);
    await em.execute(`update cards set balance = balance + 100000, held = 7 where id = ?`, [card.id]);
    try {
      const failed = await cli(['ledger:verify', '--org', org.organizationId]).then(
        () => assert.fail('ledger:verify exited 0 on a card changed behind the ledger'),
        (error: { code: number; stdout: string }) => error,
      );
      assert.equal(failed.code, 1);
      const reported = JSON.parse(failed.stdout) as { whole: boolean; checked: string[]; breaks: unknown[] };
      assert.equal(reported.whole, false);
      assert.ok(reported.checked.includes('card_balances'));
      assert.deepEqual(reported.breaks, [
        {
          invariant: 'projection_mismatch',
          subject: `cards:${card.id}`,
          asset: 'usd',
          ledger: { balance: '1000', held: '0' },
          found: { balance: '101000', held: '7' },
          organization_id: org.organizationId,
          environment: 'sandbox',
        },
      ]);
    } finally {
      // Put back, so the suite's own check after each test finds the ledger whole.
      await em.execute(`update cards set balance = balance - 100000, held = 0 where id = ?`, [card.id]);
    }
    assert.deepEqual(await cardBalanceProjection.breaks(em, org.organizationId), []);
  });
});
