import assert from 'node:assert/strict';
import type { Environment } from '../../src/api-keys/entities';
import { BALANCE_CURRENCIES, type BalanceCurrency } from '../../src/balances/entities';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Address } from '../../src/custody/entities';
import { postCustodyEntry } from '../../src/custody/journal';
import { uuid } from '../../src/shared/ids';
import { testOrm } from './environment';

type Balances = Record<BalanceCurrency, { available: bigint; reserved: bigint }>;

/**
 * The ledger reconciliation every money test ends with, for each environment: each company balance
 * row equals the sum of its journal (available and reserved apart), and what is reserved is exactly
 * what is pending (card fundings with their fee; Lightning payments with their fee limit, both
 * rounded up to whole sats; nothing holds stablecoin credits). Returns the balances of `environment`.
 */
export async function assertLedgerReconciles(organizationId: string, environment: Environment = 'sandbox'): Promise<Balances> {
  const connection = (await testOrm()).em.fork().getConnection();
  const journal = await connection.execute<{ environment: Environment; currency: BalanceCurrency; available: string; reserved: string }[]>(
    `select environment, currency,
            coalesce(sum(case kind when 'credit' then amount when 'debit' then -amount when 'reserve' then -amount when 'release' then amount else 0 end), 0) as available,
            coalesce(sum(case kind when 'reserve' then amount when 'release' then -amount when 'capture' then -amount else 0 end), 0) as reserved
       from company_balance_entries where organization_id = ? group by environment, currency`,
    [organizationId],
  );
  const rows = await connection.execute<{ environment: Environment; currency: BalanceCurrency; available: string; reserved: string }[]>(
    `select environment, currency, available, reserved from company_balances where organization_id = ?`,
    [organizationId],
  );
  const pendingCards = await connection.execute<{ environment: Environment; total: string }[]>(
    `select c.environment, coalesce(sum(t.amount + t.fee_amount), 0) as total
       from card_transactions t join cards c on c.id = t.card_id
      where t.organization_id = ? and t.status = 'pending' and t.type = 'funding' group by c.environment`,
    [organizationId],
  );
  const pendingPayments = await connection.execute<{ environment: Environment; total: string }[]>(
    `select environment, coalesce(sum(ceil(amount_msat / 1000.0) + ceil(coalesce(fee_limit_msat, 0) / 1000.0)), 0) as total
       from lightning_invoices where organization_id = ? and direction = 'outgoing' and status = 'pending' group by environment`,
    [organizationId],
  );
  const result = Object.fromEntries(BALANCE_CURRENCIES.map((currency) => [currency, { available: 0n, reserved: 0n }])) as Balances;
  for (const env of ['sandbox', 'live'] as const) {
    for (const currency of BALANCE_CURRENCIES) {
      const row = rows.find((candidate) => candidate.environment === env && candidate.currency === currency);
      const sum = journal.find((candidate) => candidate.environment === env && candidate.currency === currency);
      const balance = { available: BigInt(row?.available ?? 0), reserved: BigInt(row?.reserved ?? 0) };
      assert.deepEqual(balance, { available: BigInt(sum?.available ?? 0), reserved: BigInt(sum?.reserved ?? 0) }, `${env} ${currency} balance row differs from its journal`);
      const pending = currency === 'usd' ? pendingCards : currency === 'sat' ? pendingPayments : [];
      const reservedForPending = BigInt(pending.find((candidate) => candidate.environment === env)?.total ?? 0);
      assert.equal(balance.reserved, reservedForPending, `${env} ${currency} reserved differs from what is pending`);
      if (env === environment) result[currency] = balance;
    }
  }
  return result;
}

/**
 * Credits (or with a negative amount debits) a custody wallet's ledger directly, as a test's starting
 * point when no scanner runs: one journal entry on `address` (default the wallet's primary; the
 * wallet itself on Bitcoin), so the rows stay the sums of the journal. `locked` locks part of it too.
 */
export async function creditCustodyWallet(em: EntityManager, walletId: string, assetId: string, amount: bigint, options: { address?: string; locked?: bigint } = {}): Promise<void> {
  const { locked = 0n } = options;
  const primary = await em.findOneOrFail(Address, { wallet: walletId, ...(options.address ? { address: options.address } : { isPrimary: true }) });
  await em.transactional((tx) =>
    postCustodyEntry(tx, {
      walletId,
      addressId: primary.chain === 'bitcoin' ? null : primary.id,
      assetId,
      kind: 'opening_balance',
      reference: { type: 'test_credit', id: uuid() },
      balance: amount,
      locked,
    }),
  );
}

