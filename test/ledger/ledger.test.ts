import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { applyBalanceEntry } from '../../src/balances/service';
import { Event } from '../../src/events/entities';
import { companyAccount, counterpartyAccount } from '../../src/ledger/accounts';
import { LedgerInvariantCheck } from '../../src/ledger/entities';
import { verifyLedger } from '../../src/ledger/invariants';
import { ledgerBreaks } from '../../src/monitoring/ledger-invariants';
import { post, type Posting } from '../../src/ledger/postings';
import { ledgerProjections } from '../../src/registries';
import { ledgerInvariantCheckWorkflow } from '../../workflows';
import { createTestOrganization, startTestApp, type TestApp } from '../support/app';
import { cli } from '../support/cli';
import { releaseTimeSkippingTemporal, testOrm, timeSkippingTemporal } from '../support/environment';
import { companyBalanceEntries } from '../support/ledger';
import { createTestWorker } from '../support/worker';

const scopeOf = (organizationId: string) => ({ organizationId, environment: 'sandbox' as const });

/**
 * `amount` cents from the outside world into suspense: a posting between two counterparty accounts, which
 * no balance row projects, so the organization needs no rows of its own.
 */
function suspended(organizationId: string, amount: bigint, key = `test/${randomUUID()}`): Posting {
  const scope = scopeOf(organizationId);
  return {
    ...scope,
    key,
    kind: 'suspended',
    reference: { type: 'test', id: key },
    lines: [
      { account: counterpartyAccount(scope, 'suspense', 'usd'), amount },
      { account: counterpartyAccount(scope, 'world', 'usd'), amount: -amount },
    ],
  };
}

async function inTransaction<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
  return (await testOrm()).em.fork().transactional(work);
}

/** The PostgreSQL error a statement (or its transaction's commit) ends with. */
async function refusal(work: () => Promise<unknown>): Promise<string> {
  try {
    await work();
  } catch (error) {
    return (error as Error).message;
  }
  assert.fail('PostgreSQL accepted it');
}

describe('The double-entry ledger (src/ledger)', () => {
  it('posts balanced lines once per key, and its history cannot be changed, deleted or truncated', async () => {
    const organizationId = randomUUID();
    const posting = suspended(organizationId, 1_234n);
    assert.equal(await inTransaction((em) => post(em, posting)), true);
    assert.equal(await inTransaction((em) => post(em, { ...posting, lines: [] })), false, 'the same key posts nothing the second time');
    const em = (await testOrm()).em.fork();
    const lines = await em.execute<{ id: string; account_key: string; amount: string }[]>(
      `select l.id, l.account_key, l.amount::text from ledger_lines l join ledger_postings p on p.id = l.posting_id where p.key = ? order by l.amount`,
      [posting.key],
    );
    assert.deepEqual(
      lines.map((line) => [line.account_key, line.amount]),
      [
        [`world:${organizationId}:sandbox:usd`, '-1234'],
        [`suspense:${organizationId}:sandbox:usd`, '1234'],
      ],
    );
    for (const statement of [
      `update ledger_lines set amount = amount * 2 where id = ${lines[0]!.id}`,
      `delete from ledger_lines where id = ${lines[0]!.id}`,
      'truncate ledger_lines cascade',
      `update ledger_postings set kind = 'debit' where key = '${posting.key}'`,
      `delete from ledger_postings where key = '${posting.key}'`,
      `delete from ledger_accounts where key = '${lines[0]!.account_key}'`,
    ]) {
      assert.match(await refusal(() => em.execute(statement)), /the ledger is append-only: (UPDATE|DELETE|TRUNCATE) on ledger_\w+ is refused/, statement);
    }
    const [kept] = await em.execute<{ n: string }[]>(`select count(*)::text as n from ledger_lines l join ledger_postings p on p.id = l.posting_id where p.key = ?`, [posting.key]);
    assert.equal(kept!.n, '2');
  });

  it('refuses to commit a posting that does not balance, moves another organization\'s account, or has a zero line', async () => {
    const organizationId = randomUUID();
    const posting = suspended(organizationId, 500n);
    await assert.rejects(inTransaction((em) => post(em, { ...posting, lines: [posting.lines[0]!] })), /does not balance: usd sums to 500/, 'refused before it is written');
    // Written behind post(): PostgreSQL's deferred constraint refuses the commit.
    await inTransaction((em) => post(em, posting));
    const [{ id }] = (await (await testOrm()).em.fork().execute<{ id: string }[]>('select id from ledger_postings where key = ?', [posting.key])) as [{ id: string }];
    const unbalanced = await refusal(() => inTransaction((em) => em.execute(`insert into ledger_lines (posting_id, account_key, amount) values (?, ?, 1)`, [id, `suspense:${organizationId}:sandbox:usd`])));
    assert.match(unbalanced, new RegExp(`ledger posting ${id} does not balance: usd sums to 1`));
    const other = scopeOf(randomUUID());
    const foreign = suspended(other.organizationId, 7n);
    await inTransaction((em) => post(em, foreign));
    const crossing = await refusal(() =>
      inTransaction((em) =>
        em.execute(`insert into ledger_lines (posting_id, account_key, amount) values (?, ?, 7), (?, ?, -7)`, [
          id,
          `suspense:${other.organizationId}:sandbox:usd`,
          id,
          `suspense:${organizationId}:sandbox:usd`,
        ]),
      ),
    );
    assert.match(crossing, /moves suspense:[0-9a-f-]+:sandbox:usd of another organization or environment/);
    assert.match(await refusal(() => inTransaction((em) => em.execute(`insert into ledger_lines (posting_id, account_key, amount) values (?, ?, 0)`, [id, posting.lines[0]!.account.key]))), /ledger_lines_amount_check/);
    assert.deepEqual(await verifyLedger((await testOrm()).em.fork(), ledgerProjections, organizationId), [], 'nothing of the refused postings was kept');
  });
});

describe('The ledger invariant check (ledger:verify, the ledger-invariant-check Schedule)', () => {
  let app: TestApp;
  let env: TestWorkflowEnvironment;

  before(async () => {
    app = await startTestApp();
    env = await timeSkippingTemporal();
  });
  after(async () => {
    await releaseTimeSkippingTemporal();
    await app?.close();
  });

  it('finds a balance row changed behind the ledger: the CLI exits 1 with both figures, the workflow raises ledger.invariant_broken once and /metrics counts it', async () => {
    const org = await createTestOrganization();
    await inTransaction((tx) => applyBalanceEntry(tx, { organizationId: org.organizationId, environment: 'sandbox', currency: 'usd', kind: 'credit', amount: 10_000n, reference: { type: 'sandbox_credit', id: randomUUID() } }));
    await inTransaction((tx) => applyBalanceEntry(tx, { organizationId: org.organizationId, environment: 'sandbox', currency: 'usd', kind: 'reserve', amount: 2_500n, reference: { type: 'card_transaction', id: randomUUID() } }));
    assert.deepEqual(
      (await companyBalanceEntries(org.organizationId)).map((entry) => [entry.kind, entry.amount]),
      [
        ['credit', '10000'],
        ['reserve', '2500'],
      ],
    );
    const whole = JSON.parse((await cli(['ledger:verify', '--org', org.organizationId])).stdout) as { whole: boolean; checked: string[] };
    assert.deepEqual(whole, { whole: true, checked: ['custody_balances', 'company_balances', 'card_balances'], breaks: [] });

    const em = (await testOrm()).em.fork();
    // An insider (or a bug) raises the balance without a posting: the projection no longer equals its accounts.
    await em.execute(`update company_balances set available = available + 1000000 where organization_id = ? and currency = 'usd'`, [org.organizationId]);
    try {
      const failed = await cli(['ledger:verify', '--org', org.organizationId]).then(
        () => assert.fail('ledger:verify exited 0 on a broken ledger'),
        (error: { code: number; stdout: string }) => error,
      );
      assert.equal(failed.code, 1);
      const reported = JSON.parse(failed.stdout) as { whole: boolean; breaks: { invariant: string; subject: string; ledger: unknown; found: unknown; organization_id: string }[] };
      assert.equal(reported.whole, false);
      assert.deepEqual(reported.breaks, [
        {
          invariant: 'projection_mismatch',
          subject: `company_balances:${org.organizationId}:sandbox:usd`,
          asset: 'usd',
          ledger: { available: '7500', reserved: '2500' },
          found: { available: '1007500', reserved: '2500' },
          organization_id: org.organizationId,
          environment: 'sandbox',
        },
      ]);

      const { worker, taskQueue } = await createTestWorker(env);
      // Whole runs, over every organization of this process's database: what else is broken in another test's wallets is
      // counted too (not a negative balance an open overdrawn drift reports: ledgerBreaks).
      const elsewhere = (await ledgerBreaks(em, ledgerProjections, null)).filter((each) => each.organizationId !== org.organizationId).length;
      await worker.runUntil(async () => {
        for (const run of [1, 2]) {
          const result = await env.client.workflow.execute(ledgerInvariantCheckWorkflow, { taskQueue, workflowId: `ledger-invariant-check-${randomUUID()}`, args: [{}] });
          assert.deepEqual(result, { violations: elsewhere + 1 }, `run ${run}: this organization's break and what was broken before`);
        }
      });
      const events = await em.find(Event, { organization: org.organizationId, type: 'ledger.invariant_broken' });
      assert.equal(events.length, 1, 'the same finding is announced once');
      assert.deepEqual((events[0]!.data as { breaks: unknown[] }).breaks, [
        { invariant: 'projection_mismatch', subject: `company_balances:${org.organizationId}:sandbox:usd`, asset: 'usd', ledger: { available: '7500', reserved: '2500' }, found: { available: '1007500', reserved: '2500' } },
      ]);
      const check = await em.findOneOrFail(LedgerInvariantCheck, { id: 'latest' });
      assert.equal(check.violations, elsewhere + 1);
      const metrics = await app.request('GET', '/metrics');
      assert.match(metrics.text, new RegExp(`\nledger_invariant_violations ${elsewhere + 1}\n`));
      assert.match(metrics.text, /\nledger_invariant_last_check_timestamp_seconds \d+(\.\d+)?\n/);
    } finally {
      // Put back, so the suite's own check after each test finds the ledger whole.
      await em.execute(`update company_balances set available = available - 1000000 where organization_id = ? and currency = 'usd'`, [org.organizationId]);
    }
    assert.deepEqual(await verifyLedger(em, ledgerProjections, org.organizationId), []);
  });

  it('calls a negative balance a break even when the row equals its accounts', async () => {
    const org = await createTestOrganization();
    const scope = scopeOf(org.organizationId);
    // What a reversed deposit already spent would leave: more gone than was there, posted and projected alike.
    const move = async (amount: bigint) =>
      inTransaction(async (em) => {
        await post(em, {
          ...scope,
          key: `test/${randomUUID()}`,
          kind: amount < 0n ? 'debit' : 'credit',
          reference: { type: 'test', id: org.organizationId },
          lines: [
            { account: companyAccount(scope, 'sat', 'available'), amount },
            { account: counterpartyAccount(scope, 'world', 'sat'), amount: -amount },
          ],
        });
        await em.execute(
          `insert into company_balances (id, organization_id, environment, currency, available, reserved, updated_at) values (?, ?, 'sandbox', 'sat', ?, 0, now())
           on conflict (organization_id, environment, currency) do update set available = company_balances.available + excluded.available`,
          [`bal_${randomUUID()}`, org.organizationId, amount.toString()],
        );
      });
    await move(-5n);
    const found = await verifyLedger((await testOrm()).em.fork(), ledgerProjections, org.organizationId);
    assert.deepEqual(
      found.map((broken) => [broken.invariant, broken.subject, broken.ledger, broken.found]),
      [['negative_balance', `company_balances:${org.organizationId}:sandbox:sat`, { available: '-5', reserved: '0' }, { available: '-5', reserved: '0' }]],
    );
    await move(5n);
    assert.deepEqual(await verifyLedger((await testOrm()).em.fork(), ledgerProjections, org.organizationId), []);
  });
});
