import assert from 'node:assert/strict';
import type { Environment } from '../../src/api-keys/entities';
import { BALANCE_CURRENCIES, type BalanceCurrency } from '../../src/balances/entities';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Address } from '../../src/custody/entities';
import { postCustodyEntry } from '../../src/custody/journal';
import { verifyLedger } from '../../src/ledger/invariants';
import { ledgerProjections } from '../../src/registries';
import { uuid } from '../../src/shared/ids';
import { testOrm } from './environment';

type Balances = Record<BalanceCurrency, { available: bigint; reserved: bigint }>;

/**
 * The ledger reconciliation every money test ends with: the ledger's invariants hold for the
 * organization (src/ledger/invariants.ts, what `ledger:verify` runs: every posting balanced, every
 * balance row the sum of its accounts), and in each environment what is reserved is exactly what is
 * pending (card fundings with their fee; Lightning payments with their fee limit, both rounded up to
 * whole sats; nothing holds stablecoin credits). Returns the balances of `environment`.
 */
export async function assertLedgerReconciles(organizationId: string, environment: Environment = 'sandbox'): Promise<Balances> {
  const orm = await testOrm();
  assert.deepEqual(await verifyLedger(orm.em.fork(), ledgerProjections, organizationId), [], "the ledger's invariants are broken");
  const connection = orm.em.fork().getConnection();
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
      const balance = { available: BigInt(row?.available ?? 0), reserved: BigInt(row?.reserved ?? 0) };
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


export interface CompanyBalanceEntryRow {
  kind: string;
  amount: string;
  referenceType: string;
  referenceId: string;
}

/** An organization's company-balance movements as the ledger records them (the `company_balance_entries` view), oldest first. */
export async function companyBalanceEntries(organizationId: string, filter: { referenceType?: string; referenceId?: string; kinds?: string[] } = {}): Promise<CompanyBalanceEntryRow[]> {
  const rows = await (await testOrm()).em.fork().getConnection().execute<{ kind: string; amount: string; reference_type: string; reference_id: string }[]>(
    `select kind, amount::text, reference_type, reference_id from company_balance_entries
      where organization_id = ? and (?::text is null or reference_type = ?) and (?::text is null or reference_id = ?)
      order by created_at, id`,
    [organizationId, filter.referenceType ?? null, filter.referenceType ?? null, filter.referenceId ?? null, filter.referenceId ?? null],
  );
  return rows
    .filter((row) => !filter.kinds || filter.kinds.includes(row.kind))
    .map((row) => ({ kind: row.kind, amount: row.amount, referenceType: row.reference_type, referenceId: row.reference_id }));
}

/** A posting as a test reads it: its kind, and its lines as [account, amount], the organization's and card's ids shown as `org` and `card`. */
export interface PostingRead {
  kind: string;
  lines: [string, string][];
}

/**
 * Every posting that moves one of the card's accounts, oldest first, with all its lines (the company
 * balance's and the counterparties' too), each posting's lines in key order.
 */
export async function cardPostings(card: { id: string; organizationId: string }): Promise<PostingRead[]> {
  const rows = await (await testOrm()).em.fork().getConnection().execute<{ kind: string; lines: [string, string][] }[]>(
    `select p.kind, jsonb_agg(jsonb_build_array(l.account_key, l.amount::text) order by l.account_key) as lines
       from ledger_postings p join ledger_lines l on l.posting_id = p.id
      where p.id in (select cl.posting_id from ledger_lines cl join ledger_accounts a on a.key = cl.account_key where a.holder_id = ? and a.type like 'card\\_%')
      group by p.id order by min(l.id)`,
    [card.id],
  );
  const named = (key: string) => key.replaceAll(card.organizationId, 'org').replaceAll(card.id, 'card');
  return rows.map((row) => ({ kind: row.kind, lines: row.lines.map(([key, amount]) => [named(key), amount] as [string, string]) }));
}

/** What an organization's sandbox suspense account holds of an asset (base units): value a reorganisation made unknown, waiting for the chain's proof. */
export async function suspenseBalance(organizationId: string, assetId: string): Promise<bigint> {
  const [row] = await (await testOrm()).em
    .fork()
    .getConnection()
    .execute<{ sum: string }[]>(`select coalesce(sum(amount), 0)::text as sum from ledger_lines where account_key = ?`, [`suspense:${organizationId}:sandbox:${assetId}`]);
  return BigInt(row!.sum);
}

/** The suspense postings of one reference (`<transfer id>#<round>`), in order: their kind and what they moved into suspense. */
export async function suspenseMoves(referenceId: string): Promise<[string, bigint][]> {
  const rows = await (await testOrm()).em
    .fork()
    .getConnection()
    .execute<{ kind: string; amount: string }[]>(
      `select p.kind, l.amount::text from ledger_postings p join ledger_lines l on l.posting_id = p.id
        where p.reference_id = ? and l.account_key like 'suspense:%' order by p.created_at, p.kind`,
      [referenceId],
    );
  return rows.map((row) => [row.kind, BigInt(row.amount)]);
}
