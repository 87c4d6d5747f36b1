import assert from 'node:assert/strict';
import { LockMode } from '@mikro-orm/core';
import pg from 'pg';
import { Card } from '../../src/cards/entities';
import { findCard } from '../../src/cards/lookups';
import { lockingOnlyItsRow } from '../../src/db/row-lock';
import { retryingTransientConflicts } from '../../src/db/transient-errors';
import { pendingCard } from '../support/cards';
import { testOrm } from '../support/environment';

/** Whether another connection could lock the row now, without waiting (FOR UPDATE NOWAIT). */
async function lockableElsewhere(table: string, id: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query('begin');
    await client.query(`select id from ${table} where id = $1 for update nowait`, [id]);
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === '55P03') return false;
    throw error;
  } finally {
    await client.query('rollback').catch(() => undefined);
    await client.end();
  }
}

describe('Locks: a locked row with its relations locks that row alone; a transaction that loses a deadlock runs again', () => {
  it('the populated relation is loaded but stays free, so inserts referencing it are never blocked by the lock', async () => {
    const orm = await testOrm();
    const { org, card } = await pendingCard(0);
    const customerId = card.customer.id;
    // A bare lock mode over the joined populate locked the customer too: the cause of a deadlock between two sends' steps.
    await orm.em.fork().transactional(async (em) => {
      const bare = await em.findOneOrFail(Card, { id: card.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['customer'] });
      assert.ok(bare.customer.firstName);
      assert.equal(await lockableElsewhere('card_customers', customerId), false, 'without the helper the joined row is locked');
    });
    await orm.em.fork().transactional(async (em) => {
      const locked = await em.findOneOrFail(Card, { id: card.id }, { ...lockingOnlyItsRow(em, Card), populate: ['customer'] });
      assert.ok(locked.customer.firstName, 'the relation is loaded');
      assert.equal(await lockableElsewhere('cards', card.id), false, 'the row itself is locked');
      assert.equal(await lockableElsewhere('card_customers', customerId), true, 'its customer is not');
    });
    // The service's locked read of a card goes the same way.
    await orm.em.fork().transactional(async (em) => {
      await findCard(em, { organizationId: org.organizationId, environment: 'sandbox' }, card.id, true);
      assert.equal(await lockableElsewhere('cards', card.id), false);
      assert.equal(await lockableElsewhere('card_customers', customerId), true);
    });
  });

  it('two transactions locking two rows in opposite orders: PostgreSQL rolls one back, and it runs again to success', async () => {
    const orm = await testOrm();
    const table = `lock_probe_${process.pid}`;
    await orm.em.getConnection().execute(`create table if not exists ${table} (id int primary key, n int not null)`);
    await orm.em.getConnection().execute(`insert into ${table} values (1, 0), (2, 0) on conflict (id) do update set n = 0`);
    let attempts = 0;
    // Each holds its first row until the other holds its own, so the second statements deadlock on the first attempt.
    let held = 0;
    const bothHold = async () => {
      held += 1;
      for (let waited = 0; held < 2 && waited < 2_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    };
    const crossing = (first: number, second: number) =>
      retryingTransientConflicts(() =>
        orm.em.fork().transactional(async (em) => {
          attempts += 1;
          await em.execute(`update ${table} set n = n + 1 where id = ?`, [first]);
          await bothHold();
          await em.execute(`update ${table} set n = n + 1 where id = ?`, [second]);
        }),
      );
    await Promise.all([crossing(1, 2), crossing(2, 1)]);
    assert.ok(attempts >= 3, `one of them ran again (${attempts} attempts)`);
    const rows = await orm.em.getConnection().execute<{ id: number; n: number }[]>(`select id, n from ${table} order by id`);
    // Each committed once: the rolled-back attempt left nothing.
    assert.deepEqual(rows.map((row) => row.n), [2, 2]);
    await orm.em.getConnection().execute(`drop table ${table}`);
  });
});
