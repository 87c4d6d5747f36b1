import type { EntityManager } from '@mikro-orm/postgresql';

/** A key or a member, as the provenance graph names it: `key:<id>` or `member:<uuid>`. */
export type Origin = `key:${string}` | `member:${string}`;

/**
 * Everything an identity comes from (docs/policies.md, "Keys and people"): a key, the member it acts
 * for, the key that minted it and the member that key acted for, the key and member that added each
 * of those members, and so on up to the operator, whose CLI keys and members come from nothing.
 * Whoever stands anywhere in it could have made or used the identity, so two identities are one
 * person's unless their provenances are disjoint.
 */
export async function provenance(em: EntityManager, start: ProvenanceStart): Promise<Set<Origin>> {
  return (await provenances(em, [start]))[0]!;
}

export type ProvenanceStart = { keyId: string } | { memberId: string };

/** The provenance of each of `starts`, in their order, walked in one statement (a quorum's candidates at once). */
export async function provenances(em: EntityManager, starts: readonly ProvenanceStart[]): Promise<Set<Origin>[]> {
  if (starts.length === 0) return [];
  const kinds = starts.map((start) => ('keyId' in start ? 'key' : 'member'));
  const ids = starts.map((start) => ('keyId' in start ? start.keyId : start.memberId));
  // `union` (not `union all`) drops rows already found, so a cycle in the data ends the walk too.
  const rows = await em.getConnection().execute<{ root: number; kind: 'key' | 'member'; id: string }[]>(
    `with recursive origins (root, kind, id) as (
       select start.root::int, start.kind, start.id from unnest(?::text[], ?::text[]) with ordinality as start (kind, id, root)
       union
       select o.root, up.kind, up.id from origins o
         left join api_keys k on o.kind = 'key' and k.id = o.id
         left join members m on o.kind = 'member' and m.id = (case when o.kind = 'member' then o.id::uuid end)
         cross join lateral (values
           ('key', k.created_by_key_id), ('member', k.created_by_member_id::text), ('member', k.member_id::text),
           ('key', m.created_by_key_id), ('member', m.created_by_member_id::text)
         ) up (kind, id)
        where up.id is not null
     ) select root, kind, id from origins`,
    // As array literals: the ids are uuids and prefixed key ids, with nothing to quote.
    [`{${kinds.join(',')}}`, `{${ids.join(',')}}`],
    'all',
    em.getTransactionContext(),
  );
  const found = starts.map(() => new Set<Origin>());
  for (const row of rows) found[row.root - 1]!.add(`${row.kind}:${row.id}` as Origin);
  return found;
}

/** The origins two provenances share: none means two people. */
export function sharedOrigins(a: ReadonlySet<Origin>, b: ReadonlySet<Origin>): Origin[] {
  return [...a].filter((origin) => b.has(origin));
}
