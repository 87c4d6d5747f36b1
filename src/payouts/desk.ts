import type { EntityManager } from '@mikro-orm/postgresql';
import type { Environment } from '../api-keys/entities';
import type { ChainId } from '../catalogue/service';
import type { Config } from '../config';
import { Address, Vault, Wallet } from '../custody/entities';
import { createAddress, createVault, createWallet, type Tenant } from '../custody/service';
import type { KeyService } from '../keys/service';

/**
 * The payout desk: the custody that receives every trip's deposit and pays the fiat leg. It is the
 * service's, not the paying organization's: the organization sees its trips, never the desk's
 * wallets. PAYOUT_DESK_ORGANIZATION_ID names an organization to hold it; unset, the service keeps
 * its own desk organization under this fixed id, created on first use.
 */
export const SERVICE_DESK_ORGANIZATION_ID = '00000000-0000-4000-8000-00000000de5c';
const DESK_VAULT_NAME = 'Payout desk';

export async function deskOrganizationId(em: EntityManager, config: Pick<Config, 'PAYOUT_DESK_ORGANIZATION_ID'>): Promise<string> {
  if (config.PAYOUT_DESK_ORGANIZATION_ID) return config.PAYOUT_DESK_ORGANIZATION_ID;
  await em.execute(
    `insert into organizations (id, name, policy_activation_required_approvals, created_at) values (?, 'Payout desk (service)', 1, now()) on conflict (id) do nothing`,
    [SERVICE_DESK_ORGANIZATION_ID],
  );
  return SERVICE_DESK_ORGANIZATION_ID;
}

export async function deskTenant(em: EntityManager, config: Pick<Config, 'PAYOUT_DESK_ORGANIZATION_ID'>, environment: Environment): Promise<Tenant> {
  return { organizationId: await deskOrganizationId(em, config), environment };
}

/** A fresh address of the desk's wallet on `chain`: one per trip, so a deposit names its trip. */
export async function newDepositAddress(em: EntityManager, keys: KeyService, config: Config, environment: Environment, chain: ChainId): Promise<Address> {
  const tenant = await deskTenant(em, config, environment);
  const wallet = await deskWallet(em, keys, tenant, chain);
  return createAddress(em, keys, wallet, { label: 'payout deposit' });
}

/** The desk's wallet on `chain`, created with its vault on first use; concurrent first uses serialize on a lock. */
export async function deskWallet(em: EntityManager, keys: KeyService, tenant: Tenant, chain: ChainId): Promise<Wallet> {
  const scope = { organization: tenant.organizationId, environment: tenant.environment };
  const existing = await em.findOne(Wallet, { ...scope, chain, vault: { name: DESK_VAULT_NAME } });
  if (existing) return existing;
  await em.execute('select pg_advisory_xact_lock(hashtext(?))', [`payout-desk:${tenant.organizationId}:${tenant.environment}`]);
  const created = await em.findOne(Wallet, { ...scope, chain, vault: { name: DESK_VAULT_NAME } }, { refresh: true });
  if (created) return created;
  const vault = (await em.findOne(Vault, { ...scope, name: DESK_VAULT_NAME })) ?? createVault(em, tenant, { name: DESK_VAULT_NAME, metadata: { purpose: 'payout_desk' } });
  await em.flush();
  const { wallet } = await createWallet(em, keys, tenant, { name: `Payout desk ${chain}`, chain, vault_id: vault.id, wallet_type: 'operational' });
  await em.flush();
  return wallet;
}
