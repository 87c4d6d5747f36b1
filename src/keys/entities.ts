import { Entity, ManyToOne, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { Organization } from '../organizations/entities';
import { prefixedId } from '../shared/ids';

/**
 * The organization's BIP-39 mnemonic, envelope-encrypted: the mnemonic under a random data key
 * (AES-256-GCM), the data key under the provider's master key. Neither is ever stored in clear.
 */
@Entity({ tableName: 'organization_seeds' })
@Unique({ properties: ['organization'] })
export class OrganizationSeed {
  /** The "key id" that signing audit rows name. */
  @PrimaryKey({ type: 'text' })
  id: string = prefixedId('seed');

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

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
