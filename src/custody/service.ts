import type { EntityManager } from '@mikro-orm/postgresql';
import type { AuthContext } from '../api-keys/auth-context';
import { errors } from '../shared/errors';
import { ASSETS, findChain, networkFor, type ChainId } from '../catalogue/service';
import { addressFormatFor, coinTypeFor, type BitcoinAddressFormat, type KeyLocation } from '../keys/derivation';
import { publicAddressAt } from '../keys/public-keys';
import type { KeyService } from '../keys/service';
import { findOneByColumns, readOneWithChildren } from '../db/lean';
import { Organization } from '../organizations/entities';
import { isUuid } from '../shared/ids';
import { toDisplay } from '../shared/money';
import { iso } from '../shared/time';
import { Address, Vault, Wallet, WalletBalance, type Metadata, type WalletType } from './entities';

/** Whose and which environment's records a request may see. */
export type Tenant = Pick<AuthContext, 'organizationId' | 'environment'>;

const tenantFilter = (tenant: Tenant) => ({ organization: tenant.organizationId, environment: tenant.environment });

export interface NewVault {
  name: string;
  customer_ref_id?: string;
  metadata?: Metadata;
}

export function createVault(em: EntityManager, tenant: Tenant, input: NewVault): Vault {
  return em.create(Vault, {
    organization: em.getReference(Organization, tenant.organizationId),
    environment: tenant.environment,
    name: input.name,
    customerRefId: input.customer_ref_id ?? null,
    metadata: input.metadata ?? {},
    createdAt: new Date(),
    updatedAt: new Date(),
  });
}

export async function findVault(em: EntityManager, tenant: Tenant, id: string, param = 'id'): Promise<Vault> {
  const vault = isUuid(id) ? await findOneByColumns(em, Vault, { id, ...tenantFilter(tenant) }) : null;
  if (!vault) throw errors.notFound('vault', id, param);
  return vault;
}

export async function findWallet(em: EntityManager, tenant: Tenant, id: string, param = 'id'): Promise<Wallet> {
  const wallet = isUuid(id) ? await findOneByColumns(em, Wallet, { id, ...tenantFilter(tenant) }) : null;
  if (!wallet) throw errors.notFound('wallet', id, param);
  return wallet;
}

/**
 * The wallet and its balance rows as they are stored, detached (src/db/lean.ts), in one statement: for
 * a read that presents them and passes them to no entity manager.
 */
export async function readWalletWithBalances(em: EntityManager, tenant: Tenant, id: string) {
  const found = isUuid(id) ? await readOneWithChildren(em, Wallet, { id, ...tenantFilter(tenant) }, { entity: WalletBalance, parentKey: 'wallet' }) : null;
  if (!found) throw errors.notFound('wallet', id, 'id');
  return { wallet: found.row, balances: walletBalances(found.row, found.children) };
}

/** An address of the tenant, optionally required to belong to `wallet`. */
export async function findAddress(em: EntityManager, tenant: Tenant, id: string, param = 'id', wallet?: Wallet): Promise<Address> {
  const address = isUuid(id)
    ? await em.findOne(Address, { id, wallet: { ...tenantFilter(tenant), ...(wallet ? { id: wallet.id } : {}) } }, { populate: ['wallet'] })
    : null;
  if (!address) throw errors.notFound('address', id, param);
  return address;
}

export async function findPrimaryAddress(em: EntityManager, wallet: Wallet): Promise<Address> {
  return em.findOneOrFail(Address, { wallet, isPrimary: true });
}

export interface NewWallet {
  name: string;
  chain: ChainId;
  vault_id: string;
  wallet_type: WalletType;
  customer_ref_id?: string;
  metadata?: Metadata;
}

/** A wallet on the next free account of its chain, with its primary address (index 0). */
export async function createWallet(em: EntityManager, keys: KeyService, tenant: Tenant, input: NewWallet) {
  const vault = await findVault(em, tenant, input.vault_id, 'vault_id');
  const chain = findChain(input.chain);
  const wallet = em.create(Wallet, {
    organization: em.getReference(Organization, tenant.organizationId),
    vault,
    environment: tenant.environment,
    name: input.name,
    chain: chain.id,
    network: networkFor(chain, tenant.environment),
    walletType: input.wallet_type,
    customerRefId: input.customer_ref_id ?? null,
    metadata: input.metadata ?? {},
    accountIndex: await allocateAccount(em, tenant.organizationId, chain.id),
    coinType: coinTypeFor(chain.id, tenant.environment === 'sandbox'),
    // Nobody else can see the wallet before this transaction commits, so index 0 is the primary's.
    nextAddressIndex: 1,
    createdAt: new Date(),
    updatedAt: new Date(),
  });
  const primary = await deriveAddress(em, keys, wallet, 0, { isPrimary: true, label: '' });
  return { wallet, primary };
}

/** Next BIP-44 account of the organization on `chain`: one atomic upsert, which row-locks the counter. */
async function allocateAccount(em: EntityManager, organizationId: string, chain: ChainId): Promise<number> {
  const [row] = await em.execute<{ account: number }[]>(
    `insert into custody_account_counters (organization_id, chain, next_account) values (?, ?, 1)
     on conflict (organization_id, chain) do update set next_account = custody_account_counters.next_account + 1
     returning next_account - 1 as account`,
    [organizationId, chain],
  );
  return row!.account;
}

/** A new receive address of `wallet`; the index comes from an atomic increment, so concurrent requests never share one. */
export async function createAddress(
  em: EntityManager,
  keys: KeyService,
  wallet: Wallet,
  input: { address_format?: BitcoinAddressFormat; label?: string },
): Promise<Address> {
  const [row] = await em.execute<{ index: number }[]>(
    `update wallets set next_address_index = next_address_index + 1 where id = ? returning next_address_index - 1 as index`,
    [wallet.id],
  );
  return deriveAddress(em, keys, wallet, row!.index, { isPrimary: false, label: input.label ?? '', format: input.address_format });
}

async function deriveAddress(
  em: EntityManager,
  keys: KeyService,
  wallet: Wallet,
  index: number,
  options: { isPrimary: boolean; label: string; format?: BitcoinAddressFormat },
): Promise<Address> {
  const location = keyLocation(wallet, addressFormatFor(wallet.chain, options.format), index);
  // From the stored public side of the account (secp256k1) or of the address's key (Solana): no seed opened here.
  const derived = await publicAddressAt(em, keys, wallet.organization.id, wallet.environment, location);
  return em.create(Address, {
    organization: wallet.organization,
    wallet,
    chain: wallet.chain,
    network: wallet.network,
    address: derived.address,
    format: location.format,
    addressIndex: index,
    derivationPath: derived.path,
    isPrimary: options.isPrimary,
    label: options.label,
    createdAt: new Date(),
  });
}

/** Where an address's key sits: the wallet's coin type and account, the address's index, testnet forms in the sandbox. */
export function keyLocation(wallet: Wallet, format: Address['format'], index: number): KeyLocation {
  return { chain: wallet.chain, testnet: wallet.environment === 'sandbox', coinType: wallet.coinType, format, account: wallet.accountIndex, index };
}

/** Every asset of the wallet's chain, zero where the ledger has no row yet. */
function walletBalances(wallet: Wallet, rows: WalletBalance[]) {
  const byAsset = new Map(rows.map((row) => [row.assetId, row]));
  return ASSETS.filter((asset) => asset.chain === wallet.chain).map((asset) => {
    const row = byAsset.get(asset.id);
    const balance = BigInt(row?.balance ?? '0');
    const locked = BigInt(row?.locked ?? '0');
    return { asset, balance, locked, available: balance - locked, pending: BigInt(row?.pending ?? '0') };
  });
}

export function presentVault(vault: Vault) {
  return {
    id: vault.id,
    object: 'vault' as const,
    name: vault.name,
    customer_ref_id: vault.customerRefId ?? null,
    metadata: vault.metadata,
    created_at: iso(vault.createdAt),
    updated_at: iso(vault.updatedAt),
  };
}

export function presentAddress(address: Address) {
  return {
    id: address.id,
    object: 'address' as const,
    wallet_id: address.wallet.id,
    chain: address.chain,
    network: address.network,
    address: address.address,
    format: address.format,
    derivation_path: address.derivationPath,
    is_primary: address.isPrimary,
    label: address.label,
    created_at: iso(address.createdAt),
  };
}

export function presentWallet(wallet: Wallet, primary: Address) {
  return {
    id: wallet.id,
    object: 'wallet' as const,
    vault_id: wallet.vault.id,
    name: wallet.name,
    chain: wallet.chain,
    network: wallet.network,
    wallet_type: wallet.walletType,
    customer_ref_id: wallet.customerRefId ?? null,
    metadata: wallet.metadata,
    primary_address: presentAddress(primary),
    created_at: iso(wallet.createdAt),
    updated_at: iso(wallet.updatedAt),
  };
}

/** Presents the wallets of one page, their primary addresses fetched in one query. */
export async function walletPresenter(em: EntityManager, wallets: Wallet[]) {
  const primaries = wallets.length ? await em.find(Address, { wallet: { $in: wallets.map((w) => w.id) }, isPrimary: true }) : [];
  const byWallet = new Map(primaries.map((address) => [address.wallet.id, address]));
  return (wallet: Wallet) => presentWallet(wallet, byWallet.get(wallet.id)!);
}

export function presentBalance(wallet: Wallet, entry: ReturnType<typeof walletBalances>[number]) {
  const { decimals } = entry.asset;
  const [balance, available, locked, pending] = [entry.balance.toString(), entry.available.toString(), entry.locked.toString(), entry.pending.toString()];
  // Written out: four objects with computed keys, each spread into this one, cost a balance read about a twentieth of
  // its CPU in a profile of the reads benchmark (issue 53), each amount also turned into text twice.
  return {
    object: 'balance' as const,
    wallet_id: wallet.id,
    asset: entry.asset.symbol,
    asset_id: entry.asset.id,
    asset_decimals: decimals,
    chain: wallet.chain,
    network: wallet.network,
    // The specification's fields are base units; beside them each amount under the API's usual names: `_raw`
    // base units (the same value) and `_display` the display decimal (`x` / `x_raw` elsewhere).
    balance,
    available,
    locked,
    pending,
    balance_raw: balance,
    balance_display: toDisplay(balance, decimals),
    available_raw: available,
    available_display: toDisplay(available, decimals),
    locked_raw: locked,
    locked_display: toDisplay(locked, decimals),
    pending_raw: pending,
    pending_display: toDisplay(pending, decimals),
  };
}
