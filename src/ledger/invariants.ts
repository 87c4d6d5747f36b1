/**
 * The ledger's invariants, checked on demand (`npm run cli -- ledger:verify`) and by the
 * `ledger-invariant-check` Schedule: every posting balances per asset within one organization and
 * environment, and every projection (the balance rows services read and lock) equals the sum of its
 * accounts' lines and is never negative. PostgreSQL refuses the first when it is written; the check
 * proves it of the history as it stands, and finds projections changed behind the ledger.
 */
import { IsolationLevel } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/lean';
import type { Environment } from '../shared/environments';

export interface LedgerBreak {
  /** `unbalanced_posting`, `foreign_account`, `projection_mismatch`, `negative_balance`. */
  invariant: string;
  organizationId: string;
  environment: Environment;
  /** What is broken: a posting id, or the projection row (`address_balances:<address id>`). */
  subject: string;
  asset: string;
  /** The figures: what the ledger's lines say, and what the projection (or the posting) holds. */
  ledger: Record<string, string>;
  found: Record<string, string>;
}

/**
 * A domain's balance rows as projections of its ledger accounts: `breaks` compares them with the
 * sums of lines (in the caller's snapshot) and returns every row that differs or is negative.
 */
export interface ProjectionCheck {
  name: string;
  breaks(em: EntityManager, organizationId: string | null): Promise<LedgerBreak[]>;
}

/**
 * Every broken invariant, read in one repeatable-read snapshot so projections and sums are of the
 * same committed moment (a posting in flight is wholly in or wholly out). `organizationId` narrows
 * it to one organization.
 */
export async function verifyLedger(em: EntityManager, projections: ProjectionCheck[], organizationId: string | null = null): Promise<LedgerBreak[]> {
  return em.fork().transactional(
    async (tx) => {
      const found = [...(await postingBreaks(tx, organizationId))];
      for (const projection of projections) found.push(...(await projection.breaks(tx, organizationId)));
      return found;
    },
    { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true },
  );
}

async function postingBreaks(em: EntityManager, organizationId: string | null): Promise<LedgerBreak[]> {
  const unbalanced = await sql<{ id: string; organization_id: string; environment: Environment; asset: string; total: string }>(
    em,
    `select p.id, p.organization_id, p.environment, a.asset, sum(l.amount)::text as total
       from ledger_postings p join ledger_lines l on l.posting_id = p.id join ledger_accounts a on a.key = l.account_key
      where $1::text is null or p.organization_id = $1
      group by p.id, a.asset having sum(l.amount) <> 0`,
    [organizationId],
  );
  const foreign = await sql<{ id: string; organization_id: string; environment: Environment; asset: string; account: string; account_organization: string; account_environment: string }>(
    em,
    `select p.id, p.organization_id, p.environment, a.asset, a.key as account, a.organization_id as account_organization, a.environment::text as account_environment
       from ledger_postings p join ledger_lines l on l.posting_id = p.id join ledger_accounts a on a.key = l.account_key
      where ($1::text is null or p.organization_id = $1) and (a.organization_id <> p.organization_id or a.environment <> p.environment)`,
    [organizationId],
  );
  return [
    ...unbalanced.map((row) => ({
      invariant: 'unbalanced_posting',
      organizationId: row.organization_id,
      environment: row.environment,
      subject: row.id,
      asset: row.asset,
      ledger: { sum: '0' },
      found: { sum: row.total },
    })),
    ...foreign.map((row) => ({
      invariant: 'foreign_account',
      organizationId: row.organization_id,
      environment: row.environment,
      subject: row.id,
      asset: row.asset,
      ledger: { organization_id: row.organization_id, environment: row.environment },
      found: { account: row.account, organization_id: row.account_organization, environment: row.account_environment },
    })),
  ];
}

/** One projection row beside the sums of its accounts, figure by figure (decimal strings; absent is zero). */
export interface ProjectionRow {
  subject: string;
  organization_id: string;
  environment: Environment;
  asset: string;
  ledger: Record<string, string | null>;
  projection: Record<string, string | null>;
}

/** The rows that differ from their sums (`projection_mismatch`), or hold a negative figure (`negative_balance`). */
export function projectionBreaks(rows: ProjectionRow[]): LedgerBreak[] {
  const found: LedgerBreak[] = [];
  for (const row of rows) {
    const figures = Object.keys({ ...row.ledger, ...row.projection });
    const ledger = Object.fromEntries(figures.map((figure) => [figure, BigInt(row.ledger[figure] ?? '0').toString()]));
    const projection = Object.fromEntries(figures.map((figure) => [figure, BigInt(row.projection[figure] ?? '0').toString()]));
    const scope = { organizationId: row.organization_id, environment: row.environment, subject: row.subject, asset: row.asset, ledger, found: projection };
    if (figures.some((figure) => ledger[figure] !== projection[figure])) found.push({ invariant: 'projection_mismatch', ...scope });
    else if (figures.some((figure) => BigInt(projection[figure]!) < 0n)) found.push({ invariant: 'negative_balance', ...scope });
  }
  return found;
}
