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
export async function provenance(em: EntityManager, start: { keyId: string } | { memberId: string }): Promise<Set<Origin>> {
  const [kind, id] = 'keyId' in start ? ['key', start.keyId] : ['member', start.memberId];
  // `union` (not `union all`) drops rows already found, so a cycle in the data ends the walk too.
  const rows = await em.getConnection().execute<{ kind: 'key' | 'member'; id: string }[]>(
    `with recursive origins (kind, id) as (
       select ?::text, ?::text
       union
       select up.kind, up.id from origins o
         left join api_keys k on o.kind = 'key' and k.id = o.id
         left join members m on o.kind = 'member' and m.id = (case when o.kind = 'member' then o.id::uuid end)
         cross join lateral (values
           ('key', k.created_by_key_id), ('member', k.created_by_member_id::text), ('member', k.member_id::text),
           ('key', m.created_by_key_id), ('member', m.created_by_member_id::text)
         ) up (kind, id)
        where up.id is not null
     ) select kind, id from origins`,
    [kind, id],
    'all',
    em.getTransactionContext(),
  );
  return new Set(rows.map((row) => `${row.kind}:${row.id}` as Origin));
}

/** The origins two provenances share: none means two people. */
export function sharedOrigins(a: ReadonlySet<Origin>, b: ReadonlySet<Origin>): Origin[] {
  return [...a].filter((origin) => b.has(origin));
}
