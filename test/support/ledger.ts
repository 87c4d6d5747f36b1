import assert from 'node:assert/strict';
import { testOrm } from './environment';

/**
 * The ledger reconciliation every money test ends with: each company balance row equals the sum of
 * its journal (available and reserved apart), and what is reserved is exactly what is pending (card
 * fundings with their fee; Lightning payments with their fee limit, both rounded up to whole sats).
 * Returns the balances for further checks.
 */
export async function assertLedgerReconciles(organizationId: string): Promise<Record<'usd' | 'sat', { available: bigint; reserved: bigint }>> {
  const connection = (await testOrm()).em.fork().getConnection();
  const journal = await connection.execute<{ currency: 'usd' | 'sat'; available: string; reserved: string }[]>(
    `select currency,
            coalesce(sum(case kind when 'credit' then amount when 'debit' then -amount when 'reserve' then -amount when 'release' then amount else 0 end), 0) as available,
            coalesce(sum(case kind when 'reserve' then amount when 'release' then -amount when 'capture' then -amount else 0 end), 0) as reserved
       from company_balance_entries where organization_id = ? group by currency`,
    [organizationId],
  );
  const rows = await connection.execute<{ currency: 'usd' | 'sat'; available: string; reserved: string }[]>(
    `select currency, available, reserved from company_balances where organization_id = ?`,
    [organizationId],
  );
  const balances = { usd: { available: 0n, reserved: 0n }, sat: { available: 0n, reserved: 0n } };
  for (const currency of ['usd', 'sat'] as const) {
    const row = rows.find((candidate) => candidate.currency === currency);
    const sum = journal.find((candidate) => candidate.currency === currency);
    const balance = { available: BigInt(row?.available ?? 0), reserved: BigInt(row?.reserved ?? 0) };
    assert.deepEqual(balance, { available: BigInt(sum?.available ?? 0), reserved: BigInt(sum?.reserved ?? 0) }, `${currency} balance row differs from its journal`);
    balances[currency] = balance;
  }
  const [pendingCards] = await connection.execute<{ total: string }[]>(
    `select coalesce(sum(amount + fee_amount), 0) as total from card_transactions where organization_id = ? and status = 'pending' and type = 'funding'`,
    [organizationId],
  );
  assert.equal(balances.usd.reserved, BigInt(pendingCards!.total), 'USD reserved differs from the pending card fundings (amount + fee)');
  const [pendingPayments] = await connection.execute<{ total: string }[]>(
    `select coalesce(sum(ceil(amount_msat / 1000.0) + ceil(coalesce(fee_limit_msat, 0) / 1000.0)), 0) as total
       from lightning_invoices where organization_id = ? and direction = 'outgoing' and status = 'pending'`,
    [organizationId],
  );
  assert.equal(balances.sat.reserved, BigInt(pendingPayments!.total), 'sat reserved differs from the pending Lightning payments (amount + fee limit)');
  return balances;
}
