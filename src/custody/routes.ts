import type { RouteRegistry } from '../http/route';
import { catalogueList } from '../catalogue/schemas';
import { ListQuery, listBody, paginate } from '../shared/pagination';
import { listEnvelopeSchema } from '../shared/schemas';
import { Address, Vault, Wallet } from './entities';
import {
  AddressObject,
  BalanceObject,
  CreateAddressBody,
  CreateVaultBody,
  CreateWalletBody,
  IdParams,
  SignatureObject,
  SignPayloadBody,
  VaultObject,
  WalletListQuery,
  WalletObject,
} from './schemas';
import {
  createAddress,
  createVault,
  createWallet,
  findAddress,
  findPrimaryAddress,
  findVault,
  findWallet,
  presentAddress,
  presentBalance,
  presentVault,
  presentWallet,
  readWalletWithBalances,
  walletPresenter,
} from './service';
import { signPayload } from './signing';

const TAG = 'Custody';

export function registerCustodyRoutes(routes: RouteRegistry): void {
  routes.add({
    method: 'post',
    path: '/v1/vaults',
    operationId: 'createVault',
    summary: 'Create a vault',
    tag: TAG,
    scope: 'custody:write',
    body: CreateVaultBody,
    response: { status: 201, description: 'The new vault', schema: VaultObject },
    handler: async ({ auth, em, body }) => {
      const vault = createVault(em, auth, body);
      await em.flush();
      return { status: 201, body: presentVault(vault) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/vaults',
    operationId: 'listVaults',
    summary: 'List vaults',
    tag: TAG,
    scope: 'custody:read',
    query: ListQuery,
    response: { status: 200, description: 'A page of vaults, newest first', schema: listEnvelopeSchema(VaultObject) },
    handler: async ({ auth, em, query }) => {
      const page = await paginate(em, Vault, { organization: auth.organizationId, environment: auth.environment }, query);
      return { body: listBody(page, presentVault) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/vaults/:id',
    operationId: 'getVault',
    summary: 'Get a vault',
    tag: TAG,
    scope: 'custody:read',
    params: IdParams,
    response: { status: 200, description: 'The vault', schema: VaultObject },
    handler: async ({ auth, em, params }) => ({ body: presentVault(await findVault(em, auth, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/wallets',
    operationId: 'createWallet',
    summary: 'Create a wallet with its primary address',
    description:
      "Create a wallet in a vault on a chain. The wallet gets its own BIP-44 account of the organization's seed and a primary address at index 0. The key's environment decides the network.",
    tag: TAG,
    scope: 'custody:write',
    body: CreateWalletBody,
    response: { status: 201, description: 'The new wallet', schema: WalletObject },
    handler: async ({ auth, em, body, deps }) => {
      const { wallet, primary } = await createWallet(em, deps.keys, auth, body);
      await em.flush();
      return { status: 201, body: presentWallet(wallet, primary) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/wallets',
    operationId: 'listWallets',
    summary: 'List wallets',
    tag: TAG,
    scope: 'custody:read',
    query: WalletListQuery,
    response: { status: 200, description: 'A page of wallets, newest first', schema: listEnvelopeSchema(WalletObject) },
    handler: async ({ auth, em, query }) => {
      const where = {
        organization: auth.organizationId,
        environment: auth.environment,
        ...(query.vault_id ? { vault: query.vault_id } : {}),
        ...(query.chain ? { chain: query.chain } : {}),
      };
      const page = await paginate(em, Wallet, where, query);
      return { body: listBody(page, await walletPresenter(em, page.items)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/wallets/:id',
    operationId: 'getWallet',
    summary: 'Get a wallet',
    tag: TAG,
    scope: 'custody:read',
    params: IdParams,
    response: { status: 200, description: 'The wallet', schema: WalletObject },
    handler: async ({ auth, em, params }) => {
      const wallet = await findWallet(em, auth, params.id);
      return { body: presentWallet(wallet, await findPrimaryAddress(em, wallet)) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/wallets/:id/balances',
    operationId: 'listWalletBalances',
    summary: "Balances of every asset of the wallet's chain",
    tag: TAG,
    scope: 'custody:read',
    params: IdParams,
    response: { status: 200, description: 'One balance per asset: balance, available, locked and pending in base units (also as x_raw), and as display decimals (x_display)', schema: listEnvelopeSchema(BalanceObject) },
    handler: async ({ auth, deps, params }) => {
      const { wallet, balances } = await readWalletWithBalances(deps.orm.em, auth, params.id);
      return { body: catalogueList(balances.map((entry) => presentBalance(wallet, entry))) };
    },
  });

  routes.add({
    method: 'post',
    path: '/v1/wallets/:id/addresses',
    operationId: 'createAddress',
    summary: 'Create a receive address',
    description: 'Derives the next address of the wallet. address_format applies to Bitcoin only (default p2wpkh) and is ignored on account-based chains.',
    tag: TAG,
    scope: 'custody:write',
    params: IdParams,
    body: CreateAddressBody,
    response: { status: 201, description: 'The new address', schema: AddressObject },
    handler: async ({ auth, em, params, body, deps }) => {
      const wallet = await findWallet(em, auth, params.id);
      const address = await createAddress(em, deps.keys, wallet, body);
      await em.flush();
      return { status: 201, body: presentAddress(address) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/wallets/:id/addresses',
    operationId: 'listAddresses',
    summary: "List a wallet's addresses",
    tag: TAG,
    scope: 'custody:read',
    params: IdParams,
    query: ListQuery,
    response: { status: 200, description: 'A page of addresses, newest first', schema: listEnvelopeSchema(AddressObject) },
    handler: async ({ auth, em, params, query }) => {
      const wallet = await findWallet(em, auth, params.id);
      const page = await paginate(em, Address, { wallet }, query);
      return { body: listBody(page, presentAddress) };
    },
  });

  routes.add({
    method: 'get',
    path: '/v1/addresses/:id',
    operationId: 'getAddress',
    summary: 'Get an address',
    tag: TAG,
    scope: 'custody:read',
    params: IdParams,
    response: { status: 200, description: 'The address', schema: AddressObject },
    handler: async ({ auth, em, params }) => ({ body: presentAddress(await findAddress(em, auth, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/v1/wallets/:id/sign',
    operationId: 'signPayload',
    summary: "Sign a payload with one of the wallet's address keys",
    description:
      'secp256k1 (Bitcoin, Ethereum, Tron): recoverable low-S ECDSA over a 32-byte digest (sha256 or keccak256 of the payload, or the payload itself with no_op). ed25519 (Solana): EdDSA over the payload bytes (not_applicable or no_op) or over their digest.',
    tag: TAG,
    scope: 'signing:write',
    params: IdParams,
    body: SignPayloadBody,
    response: { status: 200, description: 'The signature', schema: SignatureObject },
    // The signer may be the worker: no transaction is held open while it signs.
    ownTransactions: true,
    handler: async ({ auth, em, params, body, deps }) => ({ body: await signPayload(em, deps, auth, params.id, body) }),
  });
}
