/** What the operator CLI says and does about organizations whose live seed is a copy of their sandbox mnemonic. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { KeyService } from './service';

const ADVICE_WITH_WALLETS =
  'Its live wallets derive their addresses from the sandbox mnemonic, so live cannot get a seed of its own while they exist. ' +
  'Move their funds to live wallets of a seed of their own (a new organization: npm run cli -- org:create --name NAME --environment live), ' +
  'or accept the sharing knowingly: both rows are sealed under the same master key, so the mnemonic is exposed only with it.';
const ADVICE_WITHOUT_WALLETS = 'It has no live wallet: npm run cli -- keys:separate-live-seed --org ID gives live a fresh seed.';

/** Every organization whose live seed shares the sandbox mnemonic, with its live wallets and what to do. */
export async function sharedLiveSeeds(em: EntityManager) {
  const rows = await em.execute<{ organization_id: string; name: string; live_seed_id: string; sandbox_seed_id: string | null; live_wallets: string }[]>(
    `select s.organization_id, o.name, s.id as live_seed_id,
            (select id from organization_seeds x where x.organization_id = s.organization_id and x.environment = 'sandbox') as sandbox_seed_id,
            (select count(*) from wallets w where w.organization_id = s.organization_id and w.environment = 'live')::text as live_wallets
       from organization_seeds s join organizations o on o.id = s.organization_id
      where s.environment = 'live' and s.shares_sandbox_mnemonic
      order by s.created_at, s.organization_id`,
  );
  return rows.map((row) => ({
    organization_id: row.organization_id,
    name: row.name,
    sandbox_seed_id: row.sandbox_seed_id,
    live_seed_id: row.live_seed_id,
    live_wallets: Number(row.live_wallets),
    what_to_do: (Number(row.live_wallets) > 0 ? ADVICE_WITH_WALLETS : ADVICE_WITHOUT_WALLETS).replace(' ID ', ` ${row.organization_id} `),
  }));
}

export type LiveSeedSeparation =
  | { outcome: 'separated'; organization_id: string; live_seed_id: string; replaced_seed_id: string }
  | { outcome: 'already_separate'; organization_id: string; live_seed_id: string | null }
  | { outcome: 'refused'; organization_id: string; live_wallets: number; reason: string };

/**
 * Gives live a fresh seed in place of a copy of the sandbox mnemonic, only when no live wallet
 * derives from that copy; with live wallets it refuses and says why. The copy's row is locked FOR
 * UPDATE first, so a live wallet being created meanwhile (which holds it FOR KEY SHARE) is counted.
 */
export async function separateLiveSeed(em: EntityManager, keys: KeyService, organizationId: string): Promise<LiveSeedSeparation> {
  return em.transactional(async (tx) => {
    const [live] = await tx.execute<{ id: string; shares_sandbox_mnemonic: boolean }[]>(
      `select id, shares_sandbox_mnemonic from organization_seeds where organization_id = ? and environment = 'live' for update`,
      [organizationId],
    );
    if (!live?.shares_sandbox_mnemonic) return { outcome: 'already_separate', organization_id: organizationId, live_seed_id: live?.id ?? null };
    const [{ count }] = (await tx.execute<{ count: string }[]>(`select count(*)::text as count from wallets where organization_id = ? and environment = 'live'`, [organizationId])) as [{ count: string }];
    const liveWallets = Number(count);
    if (liveWallets > 0) return { outcome: 'refused', organization_id: organizationId, live_wallets: liveWallets, reason: ADVICE_WITH_WALLETS };
    await tx.execute(`delete from organization_seeds where id = ?`, [live.id]);
    const fresh = await keys.ensureSeed(tx, organizationId, 'live');
    return { outcome: 'separated', organization_id: organizationId, live_seed_id: fresh.id, replaced_seed_id: live.id };
  });
}
