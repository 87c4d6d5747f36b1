import { Entity, Enum, Index, ManyToOne, OptionalProps, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { ENVIRONMENTS, type Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import { Organization } from '../organizations/entities';
import { uuid } from '../shared/ids';

/**
 * A named external destination of one chain (an exchange deposit address, a cold wallet): what
 * consolidation rules sweep to and whitelist policies may name. The address is stored in the
 * chain's canonical form for the environment's network, so one address is one entry.
 */
@Entity({ tableName: 'address_book_entries' })
@Index({ properties: ['organization', 'environment', 'createdAt', 'id'] })
@Unique({ properties: ['organization', 'environment', 'chain', 'address'] })
export class AddressBookEntry {
  [OptionalProps]?: 'createdAt' | 'updatedAt';

  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Enum({ items: () => ENVIRONMENTS, nativeEnumName: 'environment' })
  environment!: Environment;

  @Property({ type: 'text' })
  chain!: ChainId;

  @Property({ type: 'text' })
  network!: string;

  /** Canonical for the chain and the environment's network. */
  @Property({ type: 'text' })
  address!: string;

  @Property({ type: 'text' })
  label!: string;

  /**
   * From when whitelist conditions and consolidation runs count the entry: created_at plus the
   * organization's cooling period for the environment, or earlier once an approval request passes.
   */
  @Property({ type: 'timestamptz' })
  usableAt!: Date;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  @Property({ type: 'timestamptz', onUpdate: () => new Date() })
  updatedAt: Date = new Date();
}
