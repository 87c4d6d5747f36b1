import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../shared/environments';
import { prefixedId } from '../shared/ids';
import { addressFromPublicNode, hardenedPath, type KeyLocation } from './derivation';
import type { KeyService } from './service';

/** Which hardened nodes (hardenedPath) of which seed a signer is asked to derive the public side of. */
export interface PublicKeysRequest {
  organizationId: string;
  environment: Environment;
  locations: KeyLocation[];
}

/** What a signer hands back: public data only (an xpub, a public key), never a private key or the seed. */
export interface StoredPublicKeys {
  seedId: string;
  publicKeys: { path: string; publicKey: string }[];
}

/**
 * A derivation needs a hardened node whose public side is not stored yet, in a process that holds no
 * seed key: the caller rolls its transaction back, has a signer store it (src/custody/signer.ts), and
 * runs again. Never reaches a caller: the HTTP floor does exactly that (src/http/route.ts).
 */
export class PublicKeysMissing extends Error {
  override name = 'PublicKeysMissing';

  constructor(readonly request: PublicKeysRequest) {
    super(`no stored public key at ${request.locations.map(hardenedPath).join(', ')}: a signer derives it`);
  }
}

/**
 * The stored public sides of `paths` on the organization's seed of `environment`, by path. The seed row is
 * held FOR KEY SHARE until the transaction ends, as ensureSeed holds it: `keys:separate-live-seed` cannot
 * replace the seed an address being created derives from.
 */
async function storedPublicNodes(em: EntityManager, organizationId: string, environment: Environment, paths: string[]): Promise<Map<string, string>> {
  const rows = await em.execute<{ path: string; public_key: string }[]>(
    `select k.path, k.public_key from seed_public_keys k join organization_seeds s on s.id = k.seed_id
      where s.organization_id = ? and s.environment = ? and k.path in (${paths.map(() => '?').join(', ')}) for key share of s`,
    [organizationId, environment, ...paths],
  );
  return new Map(rows.map((row) => [row.path, row.public_key]));
}

/**
 * The address at `location`, from the stored public side of its hardened node: no seed is opened. A
 * process holding the seed key derives and stores a missing one here; any other throws PublicKeysMissing.
 */
export async function publicAddressAt(em: EntityManager, keys: KeyService, organizationId: string, environment: Environment, location: KeyLocation) {
  const path = hardenedPath(location);
  let publicNode = (await storedPublicNodes(em, organizationId, environment, [path])).get(path);
  if (publicNode === undefined) {
    if (!keys.signer) throw new PublicKeysMissing({ organizationId, environment, locations: withNextAccounts(location) });
    publicNode = (await storePublicKeys(em, keys, { organizationId, environment, locations: [location] })).publicKeys[0]!.publicKey;
  }
  return addressFromPublicNode(location, publicNode);
}

/** How many accounts past a new wallet's the signer stores at once: wallets made together each take the next. */
const ACCOUNTS_AHEAD = 3;

/** A new wallet's primary address (index 0) with the same address of the next accounts; any other location alone. */
const withNextAccounts = (location: KeyLocation): KeyLocation[] =>
  location.index === 0 ? Array.from({ length: ACCOUNTS_AHEAD + 1 }, (_, ahead) => ({ ...location, account: location.account + ahead })) : [location];

/**
 * The signer's half: opens the seed, derives the public sides of the requested hardened nodes and stores
 * them (a second store of one is a no-op); returns only public data.
 */
export async function storePublicKeys(em: EntityManager, keys: KeyService, request: PublicKeysRequest): Promise<StoredPublicKeys> {
  const { seed, nodes } = await keys.publicNodes(em, request.organizationId, request.environment, request.locations);
  for (const node of nodes) {
    await em.execute(`insert into seed_public_keys (id, seed_id, path, public_key, created_at) values (?, ?, ?, ?, now()) on conflict (seed_id, path) do nothing`, [
      prefixedId('spk'),
      seed.id,
      node.path,
      node.publicKey,
    ]);
  }
  return { seedId: seed.id, publicKeys: nodes };
}
