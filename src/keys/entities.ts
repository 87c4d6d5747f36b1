import { Entity, Enum, ManyToOne, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { Organization } from '../organizations/entities';
import { ENVIRONMENTS, type Environment } from '../shared/environments';
import { prefixedId } from '../shared/ids';

/**
 * An organization's BIP-39 mnemonic for one environment, envelope-encrypted: the mnemonic under a
 * random data key (AES-256-GCM), the data key under the provider's master key. Neither is ever
 * stored in clear. Sandbox and live have a seed each, so a sandbox key never opens live funds.
 */
@Entity({ tableName: 'organization_seeds' })
@Unique({ properties: ['organization', 'environment'] })
export class OrganizationSeed {
  /** The "key id" that signing audit rows name. */
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('seed');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  /**
   * A live seed that is a copy of the sandbox mnemonic: organizations that had live wallets when
   * seeds were split per environment (Migration20261130002001) keep signing for their live addresses
   * with it until the operator moves their funds (`npm run cli -- keys:seeds`).
   */
  @Property({ type: 'boolean', default: false })
  sharesSandboxMnemonic: boolean = false;

  /** 1: contexts name the organization only (seeds made before the split); 2: the organization and the environment. */
  @Property({ type: 'smallint' })
  envelopeVersion!: number;

  @Property({ type: 'text' })
  keyProvider!: string;

  @Property({ type: 'text' })
  masterKeyId!: string;

  /** base64, as the key provider returned it. */
  @Property({ type: 'text' })
  wrappedDataKey!: string;

  /** base64 of `iv || AES-256-GCM(mnemonic) || tag`. */
  @Property({ type: 'text' })
  mnemonicCiphertext!: string;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

/**
 * The public side of a hardened node of a seed, stored by the signer that derived it, so the API
 * derives addresses without the seed: secp256k1, an account's extended public key (addresses below
 * it derive publicly); ed25519 (Solana, hardened only), one address's public key (hex). Nothing here
 * is secret; a seed replaced (`keys:separate-live-seed`) takes its rows with it.
 */
@Entity({ tableName: 'seed_public_keys' })
@Unique({ properties: ['seed', 'path'] })
export class SeedPublicKey {
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('spk');

  @ManyToOne(() => OrganizationSeed, { deleteRule: 'cascade' })
  seed!: OrganizationSeed;

  /** The hardened node's path (`m/84'/0'/3'`, `m/44'/501'/0'/2'`). */
  @Property({ type: 'text' })
  path!: string;

  @Property({ type: 'text' })
  publicKey!: string;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}
