import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createOrm, type Orm } from '../../src/db/orm';
import { OutgoingTransaction } from '../../src/transactions/entities';
import { anvilSandboxConfig, deployAnvilToken, startAnvil, type Anvil } from '../support/anvil';
import { startTestApp, type TestApp } from '../support/app';
import {
  AUTHORIZATION_CENTS,
  authorizationBurst,
  burstOrganizations,
  CARD_FUNDING_CENTS,
  fire,
  outcomeOf,
  readBurst,
  sendBurst,
  VELOCITY_ADMITS,
  type BurstAnswer,
  type BurstOrganization,
} from '../support/bursts';
import { ownDatabase } from '../support/environment';
import { startAppWithWorker } from '../support/worker';

/** The pool the app runs on: two connections, so any request holding one while it waits for another starves the rest. */
const POOL = 2;

/** Each answer's outcome, counted: `done`, `refused <code>`, or `failed <status>`. */
function tally(answers: BurstAnswer[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const answer of answers) counts.set(outcomeOf(answer), (counts.get(outcomeOf(answer)) ?? 0) + 1);
  return counts;
}

/** Every answer done or refused with the contract's code; the failures' bodies in the message otherwise. */
function assertDoneOrRefused(answers: BurstAnswer[], allowedRefusals: readonly string[]): void {
  const failed = answers.filter((answer) => {
    const outcome = outcomeOf(answer);
    return outcome !== 'done' && !allowedRefusals.some((code) => outcome === `refused ${code}`);
  });
  assert.deepEqual(
    failed.map((answer) => `${answer.request.method} ${answer.request.path}: ${answer.status} ${answer.text.slice(0, 300)}`),
    [],
    `outcomes: ${JSON.stringify(Object.fromEntries(tally(answers)))}`,
  );
}

/**
 * A send burst's outcome: each accepted or refused by its organization's velocity rule or for want of funds; as
 * many accepted as the rule admits (all under no rule); one send recorded per acceptance; and in each wallet, its
 * balance untouched and exactly the accepted sends' amounts and fee limits locked. Returns the accepted sends' ids
 * by organization.
 */
async function assertSendsOutcome(app: TestApp, orgs: BurstOrganization[], answers: BurstAnswer[]): Promise<Map<string, string[]>> {
  assertDoneOrRefused(answers, ['policy_blocked', 'insufficient_funds']);
  const em = app.deps.orm.em.fork();
  const sentIds = new Map<string, string[]>();
  for (const org of orgs) {
    const accepted = answers.filter((answer) => answer.request.org === org && answer.status === 201).map((answer) => answer.body as { id: string; wallet_id: string; amount_raw: string; fee_limit_raw: string });
    sentIds.set(org.organizationId, accepted.map((sent) => sent.id));
    const asked = answers.filter((answer) => answer.request.org === org).length;
    if (org.profile === 'velocity') assert.equal(accepted.length, VELOCITY_ADMITS, `${org.organizationId}: the velocity rule admits ${VELOCITY_ADMITS}`);
    if (org.profile === 'allowed') assert.equal(accepted.length, asked, `${org.organizationId}: every send allowed`);
    assert.equal(await em.count(OutgoingTransaction, { organization: org.organizationId }), accepted.length, 'one send recorded per accepted request');
    for (const wallet of org.wallets) {
      const rows = (await app.request('GET', `/v1/wallets/${wallet.id}/balances`, { key: org.secret })).body.data as { asset_id: string; balance: string; locked: string }[];
      const eth = rows.find((row) => row.asset_id === 'ETH')!;
      assert.equal(BigInt(eth.balance), wallet.credited, 'nothing left the wallet yet');
      const reserved = accepted.filter((sent) => sent.wallet_id === wallet.id).reduce((sum, sent) => sum + BigInt(sent.amount_raw) + BigInt(sent.fee_limit_raw), 0n);
      assert.equal(BigInt(eth.locked), reserved, `${wallet.id}: each accepted send's amount and fee limit locked once, no refused one's`);
    }
  }
  return sentIds;
}

/**
 * Issue 53 (item 5): the API on a pool of two connections holds bursts with no 5xx. Every request answers done or
 * refused with its reason, and the money comes out right. On a database of its own (its thousand-odd rows and
 * pending sends are no other file's business). The fixtures (organizations, wallets, policies, cards
 * provisioned by a worker, invoices) are made through an app on the suite's pool first; the bursts then hit an
 * app on a pool of its own of POOL connections, with no worker on its task queue (accepted sends wait there, their
 * amount and fee limit locked), so that what is measured is the requests' own use of the pool.
 */
describe('Load held: bursts on a pool of two connections answer no 5xx (issue 53)', () => {
  let database: Awaited<ReturnType<typeof ownDatabase>>;
  let app: TestApp;
  let orm: Orm;
  let orgs: BurstOrganization[];
  let sentIds = new Map<string, string[]>();
  const outside = privateKeyToAccount(generatePrivateKey()).address;

  before(async function () {
    this.timeout(300_000);
    database = await ownDatabase('bursts');
    const setup = await startAppWithWorker({ DATABASE_URL: database.url, RATE_LIMIT_PER_SECOND: '100000', RATE_LIMIT_BURST: '100000' }, database.orm);
    try {
      orgs = await burstOrganizations(setup.app.request, () => database.orm.em.fork(), { organizations: 10, walletsPerOrganization: 2, withCards: true });
    } finally {
      await setup.stop();
    }
    orm = await createOrm(database.url, POOL);
    app = await startTestApp({ orm, config: { DATABASE_URL: database.url, TEMPORAL_TASK_QUEUE: `bursts-${randomUUID()}`, DATABASE_POOL_MAX: String(POOL), RATE_LIMIT_PER_SECOND: '100000', RATE_LIMIT_BURST: '100000' } });
  });
  after(async () => {
    await app?.close();
    await orm?.close();
    await database?.drop();
  });

  it('200 concurrent sends from 20 wallets of 10 organizations: accepted or refused by policy or funds, each accepted one locked once', async function () {
    this.timeout(300_000);
    const { answers } = await fire(app.request, sendBurst(orgs, 200, outside));
    sentIds = await assertSendsOutcome(app, orgs, answers);
  });

  it('500 concurrent reads (a key, balances, a send, a card, an invoice): every one answered', async function () {
    this.timeout(300_000);
    const { answers } = await fire(app.request, readBurst(orgs, 500, sentIds));
    assertDoneOrRefused(answers, []);
  });

  it('100 concurrent card authorizations on 10 cards: approved while the balance lasts, then declined, the card debited once per approval', async function () {
    this.timeout(300_000);
    const { answers } = await fire(app.request, authorizationBurst(orgs, 100));
    assertDoneOrRefused(answers, []);
    for (const org of orgs) {
      const approved = answers.filter((answer) => answer.request.org === org && answer.body.data.approved === true).length;
      assert.equal(approved, Math.floor(CARD_FUNDING_CENTS / AUTHORIZATION_CENTS), `${org.cardId}: approved while the balance covered one`);
      const card = (await app.request('GET', `/api/cards/${org.cardId}`, { key: org.secret })).body.data.card;
      assert.equal(card.balance_amount, String(CARD_FUNDING_CENTS - approved * AUTHORIZATION_CENTS), 'each approval debited once');
    }
  });
});

/**
 * The send burst on a real Ethereum node (anvil) serving sandbox Ethereum, smaller: 40 sends from 8 wallets of 4
 * organizations (one of each refusal, one allowed), on a pool of two. A send reads the node (fee market, gas) in its
 * `prepare` step, before its transaction opens; the suite's afterEach fails any node call made inside one. Wallets
 * hold their credit on the node too (anvil_setBalance), as the ledger has it; no worker, so nothing is broadcast.
 */
describe('Load held on anvil: a send burst on a pool of two connections answers no 5xx (issue 53)', () => {
  let anvil: Anvil;
  let database: Awaited<ReturnType<typeof ownDatabase>>;
  let app: TestApp;
  let orm: Orm;
  let orgs: BurstOrganization[];
  const outside = privateKeyToAccount(generatePrivateKey()).address;

  before(async function () {
    this.timeout(300_000);
    anvil = await startAnvil();
    const token = await deployAnvilToken(anvil);
    database = await ownDatabase('bursts_anvil');
    orm = await createOrm(database.url, POOL);
    const config = { ...anvilSandboxConfig(anvil, `bursts-anvil-${randomUUID()}`, token, 1), DATABASE_URL: database.url, DATABASE_POOL_MAX: String(POOL), RATE_LIMIT_PER_SECOND: '100000', RATE_LIMIT_BURST: '100000' };
    app = await startTestApp({ orm, config });
    orgs = await burstOrganizations(app.request, () => orm.em.fork(), { organizations: 4, walletsPerOrganization: 2, withCards: false });
    for (const wallet of orgs.flatMap((org) => org.wallets)) await anvil.call('anvil_setBalance', [wallet.address, `0x${wallet.credited.toString(16)}`]);
  });
  after(async () => {
    await app?.close();
    await orm?.close();
    await database?.drop();
    await anvil?.stop();
  });

  it('40 concurrent sends from 8 wallets of 4 organizations: accepted or refused by policy or funds, each accepted one locked once', async function () {
    this.timeout(300_000);
    const { answers } = await fire(app.request, sendBurst(orgs, 40, outside));
    await assertSendsOutcome(app, orgs, answers);
  });
});
