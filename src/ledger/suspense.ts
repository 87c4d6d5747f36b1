/**
 * Suspense: value whose fate a reorganisation made unknown. A settled send, a spend the platform did
 * not make, or a confirmed deposit in blocks the chain abandoned may be mined again or may never be:
 * until the chain proves which, what it had moved sits in the organization's suspense account instead
 * of with the counterparty it had gone to (or come from). Proof moves it back out: the same
 * transaction mined again at its confirmation count, or the chain's proof that it never will be (another
 * transaction took its nonce, final). Each time an item enters is one round, with keys of its own, so an
 * item reorganised twice enters and leaves twice and never moves twice per round.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { counterpartyAccount, type Counterparty, type OrganizationScope } from './accounts';
import { sql } from '../db/lean';
import { post, posted } from './postings';

export interface SuspenseItem extends OrganizationScope {
  /** What the value belongs to, one round of it: `{ type: 'transaction', id: '<id>#<round>' }`. */
  reference: { type: string; id: string };
  assetId: string;
  /** Who the ledger had booked as holding the value: a send's recipient or a reversed deposit's sender (world), a send's fee (network_fees). */
  counterparty: Counterparty;
  /** Base units the counterparty was booked with, now held in suspense instead. */
  amount: bigint;
}

const keyOf = (direction: 'enter' | 'leave', item: SuspenseItem) => `suspense/${direction}/${item.reference.type}/${item.reference.id}/${item.assetId}/${item.counterparty}`;

const lines = (item: SuspenseItem, sign: bigint) => [
  { account: counterpartyAccount(item, item.counterparty, item.assetId), amount: -sign * item.amount },
  { account: counterpartyAccount(item, 'suspense', item.assetId), amount: sign * item.amount },
];

/** The item's value leaves its counterparty for suspense, once per round. */
export async function enterSuspense(em: EntityManager, item: SuspenseItem): Promise<boolean> {
  return post(em, { ...item, key: keyOf('enter', item), kind: 'suspense_entered', lines: lines(item, 1n) });
}

/**
 * Proof came: the round's value returns from suspense to its counterparty, once, and only if it had
 * entered. `mined_again`: the counterparty had it after all (`suspense_left`); `never_mined`: the chain
 * proved the movement will never happen (`suspense_written_off`, e.g. a reversed deposit's value back
 * with the outside world that never paid it). Either closes the round: they share its key.
 */
export async function leaveSuspense(em: EntityManager, item: SuspenseItem, proof: 'mined_again' | 'never_mined' = 'mined_again'): Promise<boolean> {
  if (!(await posted(em, keyOf('enter', item)))) return false;
  return post(em, { ...item, key: keyOf('leave', item), kind: proof === 'mined_again' ? 'suspense_left' : 'suspense_written_off', lines: lines(item, -1n) });
}

/** A round in suspense the chain has proven neither way yet. */
export interface OpenSuspenseItem extends OrganizationScope {
  reference: { type: string; id: string };
  assetId: string;
  counterparty: Counterparty;
  amount: bigint;
  enteredAt: Date;
}

/**
 * The rounds in suspense not yet proven either way, oldest first: entered, with neither a leave
 * (mined again, or written off) nor a return of the same reference to its holder (`reorg_returned`:
 * a send or a spend proven never to be mined, whose value went back to the wallet).
 */
export async function openSuspenseItems(em: EntityManager, filter: Partial<OrganizationScope> = {}): Promise<OpenSuspenseItem[]> {
  const rows = await sql<{ organization_id: string; environment: OrganizationScope['environment']; asset: string; reference_type: string; reference_id: string; counterparty: Counterparty; amount: string; created_at: Date }>(
    em,
    `select p.organization_id, p.environment, a.asset, p.reference_type, p.reference_id, split_part(p.key, '/', 6) as counterparty, l.amount::text as amount, p.created_at
       from ledger_postings p
       join ledger_lines l on l.posting_id = p.id
       join ledger_accounts a on a.key = l.account_key and a.type = 'suspense'
      where p.kind = 'suspense_entered' and ($1::text is null or p.organization_id = $1) and ($2::text is null or p.environment::text = $2)
        and not exists (select 1 from ledger_postings closed where closed.key = 'suspense/leave/' || substr(p.key, length('suspense/enter/') + 1))
        and not exists (select 1 from ledger_postings returned where returned.kind = 'reorg_returned' and returned.reference_type = p.reference_type and returned.reference_id = p.reference_id)
      order by p.created_at, p.key`,
    [filter.organizationId ?? null, filter.environment ?? null],
  );
  return rows.map((row) => ({
    organizationId: row.organization_id,
    environment: row.environment,
    reference: { type: row.reference_type, id: row.reference_id },
    assetId: row.asset,
    counterparty: row.counterparty,
    amount: BigInt(row.amount),
    enteredAt: new Date(row.created_at),
  }));
}
