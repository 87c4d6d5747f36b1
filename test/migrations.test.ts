import assert from 'node:assert/strict';
import type { Migration } from '@mikro-orm/migrations';
import type { EntityManager } from '@mikro-orm/postgresql';
import { testOrm } from './support/environment';
import { Migration20261126104200 } from '../src/db/migrations/Migration20261126104200';
import { Migration20261129100001 } from '../src/db/migrations/Migration20261129100001';
import { Migration20261129200001 } from '../src/db/migrations/Migration20261129200001';
import { cardBalanceProjection } from '../src/cards/ledger';

/** A migration's statements up, as the migrator would run them. */
async function statementsUp(migrationClass: new (...args: ConstructorParameters<typeof Migration>) => Migration): Promise<string[]> {
  const em = (await testOrm()).em.fork();
  const migration = new migrationClass(em.getDriver(), em.config);
  migration.reset();
  await migration.up();
  return migration.getQueries().map((query) => (typeof query === 'string' ? query : query.toString()));
}

/** Runs `work` in a transaction on a scratch schema searched before public (the real types and tables behind it), all rolled back. */
async function inScratchSchema(work: (tx: EntityManager) => Promise<void>): Promise<void> {
  const tx = (await testOrm()).em.fork();
  await tx.begin();
  try {
    await tx.execute('create schema migration_scratch');
    await tx.execute('set local search_path to migration_scratch, public');
    await work(tx);
  } finally {
    await tx.rollback();
  }
}

describe('Database migrations', () => {
  it('are all applied, and the migrated schema and the snapshot both match the entities (migration:check)', async () => {
    const orm = await testOrm();
    const migrator = orm.getMigrator();
    assert.deepEqual(await migrator.getPendingMigrations(), []);
    const drift = await orm.schema.getUpdateSchemaSQL({ wrap: false, safe: false, dropTables: true });
    assert.equal(drift.trim(), '', `the migrated database differs from the entities:\n${drift}`);
    assert.equal(await migrator.checkMigrationNeeded(), false, 'the migration snapshot is stale: run npm run migration:create');
  });
});

describe('Migration20261126104200: consolidation triggers counted', () => {
  it('turns each run\'s recorded_triggers array into its count and its last trigger, and back', async () => {
    const em = (await testOrm()).em.fork();
    const migration = new Migration20261126104200(em.getDriver(), em.config);
    const statements = async (direction: 'up' | 'down') => {
      migration.reset();
      await migration[direction]();
      return migration.getQueries().map((query) => (typeof query === 'string' ? query : query.toString()));
    };
    const up = await statements('up');
    const down = await statements('down');
    const tx = em.fork();
    await tx.begin();
    try {
      // The statements run on a scratch table of the same name, gone with the rollback.
      await tx.execute('create schema migration_scratch');
      await tx.execute('set local search_path to migration_scratch');
      await tx.execute('create table consolidation_runs (id int primary key, recorded_triggers jsonb null)');
      await tx.execute(
        `insert into consolidation_runs values (1, null), (2, '[]'), (3, '[{"source":"manual","at":"2026-11-01T00:00:00.000Z","detail":"key"},{"source":"threshold","at":"2026-11-01T00:01:00.000Z","detail":"deposit"}]')`,
      );
      for (const statement of up) await tx.execute(statement);
      const counted = await tx.execute<{ id: number; recorded_trigger_count: number; last_recorded_trigger: unknown }[]>('select * from consolidation_runs order by id');
      assert.deepEqual(counted, [
        { id: 1, recorded_trigger_count: 0, last_recorded_trigger: null },
        { id: 2, recorded_trigger_count: 0, last_recorded_trigger: null },
        { id: 3, recorded_trigger_count: 2, last_recorded_trigger: { source: 'threshold', at: '2026-11-01T00:01:00.000Z', detail: 'deposit' } },
      ]);
      for (const statement of down) await tx.execute(statement);
      const listed = await tx.execute<{ id: number; recorded_triggers: unknown }[]>('select id, recorded_triggers from consolidation_runs order by id');
      assert.deepEqual(listed[2], { id: 3, recorded_triggers: [{ source: 'threshold', at: '2026-11-01T00:01:00.000Z', detail: 'deposit' }] });
    } finally {
      await tx.rollback();
    }
  });
});

describe('Migration20261129100001: the journals become the double-entry ledger', () => {
  it('turns every custody and company-balance entry into a balanced posting, and the old names read them back', async () => {
    const up = await statementsUp(Migration20261129100001);
    await inScratchSchema(async (tx) => {
      // The statements run on scratch tables of the same names (the real types from public), gone with the rollback.
      await tx.execute(`create type balance_entry_kind as enum ('credit', 'debit', 'reserve', 'release', 'capture')`);
      await tx.execute('create table wallets (id uuid primary key, organization_id uuid not null, environment environment not null)');
      await tx.execute('create table addresses (id uuid primary key, wallet_id uuid not null)');
      await tx.execute(`create table custody_journal_entries (id text primary key, wallet_id uuid not null, address_id uuid null, asset_id text not null, kind text not null,
        reference_type text not null, reference_id text not null, balance numeric(78,0) not null default 0, locked numeric(78,0) not null default 0, pending numeric(78,0) not null default 0, created_at timestamptz not null)`);
      await tx.execute(`create table company_balance_entries (id text primary key, organization_id uuid not null, environment environment not null, currency balance_currency not null,
        kind balance_entry_kind not null, amount numeric(38,0) not null, reference_type text not null, reference_id text not null, created_at timestamptz not null)`);
      const org = '00000000-0000-4000-8000-000000000001';
      const [evm, btc, address] = ['00000000-0000-4000-8000-0000000000e1', '00000000-0000-4000-8000-0000000000b1', '00000000-0000-4000-8000-0000000000a1'];
      await tx.execute(`insert into wallets values ('${evm}', '${org}', 'live'), ('${btc}', '${org}', 'live')`);
      await tx.execute(`insert into addresses values ('${address}', '${evm}')`);
      const custody = [
        ['cje_1', evm, address, 'ETH', 'deposit_seen', 'incoming_transfer', 't1', '0', '0', '100'],
        ['cje_2', evm, address, 'ETH', 'deposit_confirmed', 'incoming_transfer', 't1', '100', '0', '-100'],
        ['cje_3', evm, address, 'ETH', 'send_lock', 'transaction', 's1', '0', '60', '0'],
        ['cje_4', evm, address, 'ETH', 'send_release', 'transaction', 's1', '0', '-60', '0'],
        ['cje_5', evm, address, 'ETH', 'send_debit', 'transaction', 's1', '-50', '0', '0'],
        ['cje_6', evm, address, 'ETH', 'fee_debit', 'transaction', 's1', '-7', '0', '0'],
        ['cje_7', btc, null, 'BTC', 'opening_balance', 'migration', 'm1', '9', '0', '0'],
      ];
      for (const [index, row] of custody.entries()) {
        await tx.execute(`insert into custody_journal_entries values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now() + make_interval(secs => ?))`, [...row, index]);
      }
      const company = [
        ['bent_1', 'credit', '1000', 'sandbox_credit', 'c1'],
        ['bent_2', 'reserve', '300', 'card_transaction', 'k1'],
        ['bent_3', 'capture', '300', 'card_transaction', 'k1'],
        ['bent_4', 'reserve', '20', 'lightning_payment', 'p1'],
        ['bent_5', 'release', '20', 'lightning_payment', 'p1'],
      ];
      for (const [index, [id, kind, amount, type, reference]] of company.entries()) {
        await tx.execute(`insert into company_balance_entries values (?, ?, 'live', 'usd', ?, ?, ?, ?, now() + make_interval(secs => ?))`, [id, org, kind, amount, type, reference, index]);
      }
      for (const statement of up) await tx.execute(statement);

      const postings = await tx.execute<{ id: string; key: string }[]>('select id, key from ledger_postings order by id');
      assert.equal(postings.length, custody.length + company.length);
      assert.equal(postings.find((posting) => posting.id === 'cje_5')!.key, `custody/${evm}/ETH/send_debit/transaction/s1`);
      assert.equal(postings.find((posting) => posting.id === 'bent_2')!.key, `company/${org}/live/usd/reserve/card_transaction/k1`);
      assert.deepEqual(await tx.execute('select posting_id from ledger_lines group by posting_id, (select asset from ledger_accounts a where a.key = account_key) having sum(amount) <> 0'), []);
      const sums = await tx.execute<{ account_key: string; total: string }[]>('select account_key, sum(amount)::text as total from ledger_lines group by account_key order by account_key');
      assert.deepEqual(Object.fromEntries(sums.map((row) => [row.account_key, row.total])), {
        [`card_issuer:${org}:live:usd`]: '300',
        [`company:${org}:live:usd:available`]: '700',
        [`custody:${address}:ETH:available`]: '43',
        [`custody:${address}:ETH:locked`]: '0',
        [`custody:${address}:ETH:pending`]: '0',
        [`custody:${btc}:BTC:available`]: '9',
        [`company:${org}:live:usd:reserved`]: '0',
        [`network_fees:${org}:live:ETH`]: '7',
        [`opening_balances:${org}:live:BTC`]: '-9',
        [`sandbox_faucet:${org}:live:usd`]: '-1000',
        [`world:${org}:live:ETH`]: '-50',
      });
      const custodyView = await tx.execute<Record<string, string | null>[]>(
        'select id, wallet_id, address_id, asset_id, kind, reference_type, reference_id, balance::text, locked::text, pending::text from custody_journal_entries order by id',
      );
      assert.deepEqual(
        custodyView.map((row) => Object.values(row)),
        custody.map(([id, wallet, addressId, asset, kind, type, reference, balance, locked, pending]) => [id, wallet, addressId, asset, kind, type, reference, balance, locked, pending]),
      );
      const companyView = await tx.execute<Record<string, string>[]>('select id, kind, amount::text, reference_type, reference_id from company_balance_entries order by id');
      assert.deepEqual(
        companyView.map((row) => Object.values(row)),
        company.map(([id, kind, amount, type, reference]) => [id, kind, amount, type, reference]),
      );
      await assert.rejects(tx.execute(`update ledger_lines set amount = 1`), /the ledger is append-only/);
    });
  });
});

describe('Migration20261129200001: cards open their ledger accounts', () => {
  it("posts each card's balance and hold as an opening posting, once; the cards then equal their accounts", async () => {
    const up = await statementsUp(Migration20261129200001);
    await inScratchSchema(async (tx) => {
      // A scratch cards table of the same name; the ledger's own tables, whose new rows go with the rollback.
      await tx.execute('create table cards (id uuid primary key, organization_id uuid not null, environment environment not null, balance numeric(38,0) not null, held numeric(38,0) not null)');
      const org = '00000000-0000-4000-8000-0000000000c0';
      const [held, negative, empty] = ['00000000-0000-4000-8000-0000000000c1', '00000000-0000-4000-8000-0000000000c2', '00000000-0000-4000-8000-0000000000c3'];
      await tx.execute(`insert into cards values ('${held}', '${org}', 'live', 1200, 200), ('${negative}', '${org}', 'live', -500, 0), ('${empty}', '${org}', 'sandbox', 0, 0)`);
      assert.equal((await cardBalanceProjection.breaks(tx, org)).length, 2, 'before: two cards with money and no accounts');
      for (const statement of up) await tx.execute(statement);
      for (const statement of up) await tx.execute(statement);

      const lines = await tx.execute<{ key: string; kind: string; account_key: string; amount: string }[]>(
        `select p.key, p.kind, l.account_key, l.amount::text from ledger_postings p join ledger_lines l on l.posting_id = p.id where p.organization_id = ? order by p.key, l.account_key`,
        [org],
      );
      const opening = (card: string) => `card/${card}/opening_balance/migration/Migration20261129200001`;
      assert.deepEqual(
        lines.map((line) => [line.key, line.kind, line.account_key, line.amount]),
        [
          [opening(held), 'opening_balance', `card:${held}:usd:available`, '1000'],
          [opening(held), 'opening_balance', `card:${held}:usd:held`, '200'],
          [opening(held), 'opening_balance', `opening_balances:${org}:live:usd`, '-1200'],
          [opening(negative), 'opening_balance', `card:${negative}:usd:available`, '-500'],
          [opening(negative), 'opening_balance', `opening_balances:${org}:live:usd`, '500'],
        ],
        'one posting per card with money, the second run posting nothing',
      );
      assert.deepEqual(await cardBalanceProjection.breaks(tx, org), []);
    });
  });
});
