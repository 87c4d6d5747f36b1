import { Collection, Entity, type Opt, Enum, Index, ManyToMany, ManyToOne, PrimaryKey, Property, Unique } from '@mikro-orm/core';
import { uuid } from '../shared/ids';

export const ORG_ROLES = ['owner', 'admin', 'approver', 'viewer'] as const;
export type OrgRole = (typeof ORG_ROLES)[number];

@Entity({ tableName: 'organizations' })
export class Organization {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @Property({ type: 'text' })
  name!: string;

  /** Approvals a policy activation needs; 0 enforces a policy at once (see docs/policies.md). */
  @Property({ type: 'integer', default: 1 })
  policyActivationRequiredApprovals: Opt<number> = 1;

  /** Hours a new live address-book entry waits before whitelists and consolidation count it (docs/address-book.md). */
  @Property({ type: 'integer', default: 24 })
  addressBookCoolingHoursLive: Opt<number> = 24;

  /** The same for sandbox entries: none by default, so a sandbox flow can use an entry at once. */
  @Property({ type: 'integer', default: 0 })
  addressBookCoolingHoursSandbox: Opt<number> = 0;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();

  constructor(name: string) {
    this.name = name;
  }
}

/** A named group of members; approvals can name a role instead of a person. */
@Entity({ tableName: 'roles' })
@Unique({ properties: ['organization', 'name'] })
export class Role {
  @PrimaryKey({ type: 'text' })
  id!: string;

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text', default: '' })
  description: string = '';

  /** Built-in roles mirror an org_role and cannot be edited. */
  @Property({ type: 'boolean', default: false })
  builtIn: boolean = false;

  @ManyToMany(() => Member, (member) => member.roles)
  members = new Collection<Member>(this);

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}

@Entity({ tableName: 'members' })
@Unique({ properties: ['organization', 'email'] })
@Index({ properties: ['organization', 'createdAt', 'id'] })
export class Member {
  @PrimaryKey({ type: 'uuid' })
  id: string = uuid();

  @ManyToOne(() => Organization, { deleteRule: 'cascade' })
  organization!: Organization;

  @Property({ type: 'text' })
  name!: string;

  @Property({ type: 'text' })
  email!: string;

  @Enum({ items: () => ORG_ROLES, nativeEnumName: 'org_role' })
  orgRole!: OrgRole;

  @ManyToMany({ entity: () => Role, owner: true, pivotTable: 'member_roles' })
  roles = new Collection<Role>(this);

  /** The API key that added this member (null: the operator, through the CLI). Approvals trace it (docs/policies.md). */
  @Property({ type: 'text', nullable: true })
  createdByKeyId?: string | null;

  /** The member that key acted for, if any. */
  @Property({ type: 'uuid', nullable: true })
  createdByMemberId?: string | null;

  @Property({ type: 'timestamptz' })
  createdAt: Date = new Date();
}
