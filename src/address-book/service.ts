import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { CHAIN_IDS, findChain, networkFor, type ChainId } from '../catalogue/service';
import { canonicalAddress } from '../chains/addresses';
import { ConsolidationRule } from '../consolidation/entities';
import type { Tenant } from '../custody/service';
import type { Environment } from '../api-keys/entities';
import { Organization } from '../organizations/entities';
import { errors } from '../shared/errors';
import { isUuid } from '../shared/ids';
import { iso } from '../shared/time';
import { AddressBookEntry } from './entities';
import { withArticle } from '../shared/articles';

export interface CreateAddressBookEntryInput {
  chain: ChainId;
  address: string;
  label: string;
}

const tenantFilter = (tenant: Tenant) => ({ organization: tenant.organizationId, environment: tenant.environment });

export function presentAddressBookEntry(entry: AddressBookEntry) {
  return {
    id: entry.id,
    object: 'address_book_entry' as const,
    chain: entry.chain,
    network: entry.network,
    address: entry.address,
    label: entry.label,
    usable_at: iso(entry.usableAt),
    created_at: iso(entry.createdAt),
    updated_at: iso(entry.updatedAt),
  };
}

/** The organization's cooling period of a new entry in `environment`, in hours. */
export const coolingHours = (organization: Organization, environment: Environment): number =>
  environment === 'live' ? organization.addressBookCoolingHoursLive : organization.addressBookCoolingHoursSandbox;

/** Whether whitelists and consolidation count the entry at `at`: its cooling period is over, or an approval cut it short. */
export const isUsable = (entry: AddressBookEntry, at = new Date()): boolean => entry.usableAt.getTime() <= at.getTime();

/**
 * Adds a destination, its address in the chain's canonical form for the environment's network
 * (anything else is 400 on `address`). One entry per address and chain in an environment: a
 * second is 409 `address_book_entry_exists` naming the first. The entry is usable once the
 * organization's cooling period for the environment has passed (usable_at).
 */
export async function createAddressBookEntry(em: EntityManager, tenant: Tenant, input: CreateAddressBookEntryInput): Promise<AddressBookEntry> {
  const chain = findChain(input.chain);
  const network = networkFor(chain, tenant.environment);
  const address = canonicalAddress(chain.id, tenant.environment, input.address);
  if (!address) throw errors.validation(`address is not ${withArticle(chain.id)} address on ${network}.`, 'address');
  // Serializes creations of one address, so that two at once answer one 201 and one 409 (never a unique-violation 500).
  await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`address-book:${tenant.organizationId}:${tenant.environment}:${chain.id}:${address}`]);
  const existing = await em.findOne(AddressBookEntry, { ...tenantFilter(tenant), chain: chain.id, address });
  if (existing) {
    throw errors.conflict('address_book_entry_exists', `${address} is already in the address book as entry ${existing.id} ('${existing.label}').`, {
      address_book_entry_id: existing.id,
    });
  }
  const organization = await em.findOneOrFail(Organization, { id: tenant.organizationId });
  const createdAt = new Date();
  const entry = em.create(AddressBookEntry, {
    organization,
    environment: tenant.environment,
    chain: chain.id,
    network,
    address,
    label: input.label,
    createdAt,
    usableAt: new Date(createdAt.getTime() + coolingHours(organization, tenant.environment) * 3_600_000),
  });
  await em.flush();
  return entry;
}

export async function findAddressBookEntry(em: EntityManager, tenant: Tenant, id: string, param = 'id', lock = false): Promise<AddressBookEntry> {
  const entry = isUuid(id)
    ? await em.findOne(AddressBookEntry, { id, ...tenantFilter(tenant) }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {})
    : null;
  if (!entry) throw errors.notFound('address_book_entry', id, param);
  return entry;
}

/**
 * Removes an entry, unless a consolidation rule sweeps to it: a rule not deleted, or a deleted one
 * whose run is still going (409 `address_book_entry_in_use` with their rule_ids; nothing changes).
 * The entry row is locked first, so a rule being created with it as destination either commits
 * before (and is seen here) or waits and then finds it gone. Deleted rules that named it keep their
 * runs and sweeps (each sweep holds its destination address) but lose the reference.
 */
export async function deleteAddressBookEntry(em: EntityManager, tenant: Tenant, id: string): Promise<AddressBookEntry> {
  const entry = await findAddressBookEntry(em, tenant, id, 'id', true);
  const users = await em.find(
    ConsolidationRule,
    { destinationAddressBook: entry, $or: [{ deletedAt: null }, { activeRunId: { $ne: null } }] },
    { fields: ['id'], orderBy: { createdAt: 'asc', id: 'asc' } },
  );
  if (users.length > 0) {
    const ruleIds = users.map((rule) => rule.id);
    throw errors.conflict('address_book_entry_in_use', `Consolidation rule(s) ${ruleIds.join(', ')} sweep to this entry: delete them or change their destination first.`, {
      rule_ids: ruleIds,
    });
  }
  await em.nativeUpdate(ConsolidationRule, { destinationAddressBook: entry, deletedAt: { $ne: null } }, { destinationAddressBook: null });
  em.remove(entry);
  await em.flush();
  return entry;
}

/** Refuses ids that are not entries of the tenant's environment: 404 `resource_missing` on `param`, naming the first. */
export async function assertAddressBookEntries(em: EntityManager, tenant: Tenant, ids: readonly string[], param: string): Promise<void> {
  const wanted = [...new Set(ids)];
  const found = new Set(
    (await em.find(AddressBookEntry, { id: { $in: wanted.filter(isUuid) }, ...tenantFilter(tenant) }, { fields: ['id'] })).map((entry) => entry.id),
  );
  const missing = wanted.find((id) => !found.has(id));
  if (missing !== undefined) throw errors.notFound('address_book_entry', missing, param);
}

/**
 * The ids of the tenant's usable entries that list `address` on `chain` (at most one), compared in
 * the chain's canonical form: what whitelist conditions see, so an entry still in its cooling
 * period neither passes an in_address_book rule nor escapes a not_in_address_book one. None for an
 * unknown chain.
 */
export async function addressBookEntryIdsOf(em: EntityManager, tenant: Tenant, chain: string, address: string): Promise<string[]> {
  if (!(CHAIN_IDS as readonly string[]).includes(chain)) return [];
  const canonical = canonicalAddress(chain as ChainId, tenant.environment, address) ?? address;
  const entries = await em.find(
    AddressBookEntry,
    { ...tenantFilter(tenant), chain: chain as ChainId, address: canonical, usableAt: { $lte: new Date() } },
    { fields: ['id'] },
  );
  return entries.map((entry) => entry.id);
}
