/**
 * Posting to the double-entry ledger: one balanced movement, once. PostgreSQL holds the rules
 * (src/db/migrations/Migration20261129100001.ts): lines are insert-only, and a transaction that
 * commits a posting whose lines do not sum to zero per asset, or that names another organization's
 * or environment's account, is refused. The checks here only fail earlier with a clearer message.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/lean';
import { prefixedId } from '../shared/ids';
import type { AccountRef, OrganizationScope } from './accounts';

export interface PostingLine {
  account: AccountRef;
  /** Signed, in the account's asset's base units; a zero line is left out. */
  amount: bigint;
}

export interface Posting extends OrganizationScope {
  /** What makes the movement happen once: a second posting with the same key posts nothing. */
  key: string;
  kind: string;
  reference: { type: string; id: string };
  lines: PostingLine[];
}

/**
 * Writes the posting, its lines and any account it names for the first time, in one statement of
 * the caller's transaction. Returns false, writing nothing, when the key was posted before.
 * Accounts are created in key order, so two postings creating the same accounts cannot deadlock.
 */
export async function post(em: EntityManager, posting: Posting): Promise<boolean> {
  const lines = posting.lines.filter((line) => line.amount !== 0n);
  const perAsset = new Map<string, bigint>();
  for (const line of lines) perAsset.set(line.account.asset, (perAsset.get(line.account.asset) ?? 0n) + line.amount);
  for (const [asset, sum] of perAsset) if (sum !== 0n) throw new Error(`posting ${posting.key} does not balance: ${asset} sums to ${sum}`);
  const accounts = [...new Map(lines.map((line) => [line.account.key, line.account])).values()];
  const written = await sql<{ id: string }>(
    em,
    `with posting as (
       insert into ledger_postings (id, key, environment, organization_id, kind, reference_type, reference_id, created_at)
       values ($1, $2, $3::environment, $4, $5, $6, $7, now()) on conflict (key) do nothing returning id
     ), accounts as (
       insert into ledger_accounts (key, environment, organization_id, asset, type, holder_id, created_at)
       select a.key, $3::environment, $4, a.asset, a.type, a.holder_id, now()
         from jsonb_to_recordset($8::jsonb) as a(key text, asset text, type text, holder_id text)
        where exists (select 1 from posting) order by a.key
       on conflict (key) do nothing
     ), lines as (
       insert into ledger_lines (posting_id, account_key, amount)
       select posting.id, l.key, l.amount from posting, jsonb_to_recordset($9::jsonb) as l(key text, amount numeric)
     )
     select id from posting`,
    [
      prefixedId('lpst'),
      posting.key,
      posting.environment,
      posting.organizationId,
      posting.kind,
      posting.reference.type,
      posting.reference.id,
      JSON.stringify(accounts.map((account) => ({ key: account.key, asset: account.asset, type: account.type, holder_id: account.holderId }))),
      JSON.stringify(lines.map((line) => ({ key: line.account.key, amount: line.amount.toString() }))),
    ],
  );
  return written.length > 0;
}

/** Whether a posting with this key exists (a movement refused now may have been applied by an earlier try). */
export async function posted(em: EntityManager, key: string): Promise<boolean> {
  return (await sql(em, 'select 1 from ledger_postings where key = $1', [key])).length > 0;
}
