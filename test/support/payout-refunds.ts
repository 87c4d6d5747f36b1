import assert from 'node:assert/strict';
import { OutgoingTransaction } from '../../src/transactions/entities';
import type { TestApp } from './app';
import { eventually } from './eventually';

/**
 * Mines a Bitcoin payout refund's send once its own workflow has broadcast it (the devnet mines only
 * when asked: blocks mined before the send reaches the mempool would leave it there), then waits for
 * the trip to show the refund refunded; returns the trip as `GET /payouts/trips/:tripId` answers it.
 */
export async function mineRefund(app: TestApp, key: string, tripId: string, transactionId: string) {
  await eventually(async () => (await app.deps.orm.em.fork().count(OutgoingTransaction, { id: transactionId, status: 'broadcast' })) || undefined, 'the refund broadcast');
  const mined = await app.request('POST', '/v1/sandbox/chains/bitcoin/blocks', { key, body: { count: 2 } });
  assert.equal(mined.status, 200, mined.text);
  return eventually(
    async () => {
      const read = await app.request('GET', `/payouts/trips/${tripId}`, { key });
      return read.body.refunds[0].status === 'refunded' ? read.body : undefined;
    },
    'the refund mined',
    60_000,
  );
}
