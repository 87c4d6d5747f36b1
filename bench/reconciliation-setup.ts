import type { EntityManager } from '@mikro-orm/postgresql';
import { encodeAbiParameters, getAddress, keccak256, parseAbiParameters, toHex, type Hex } from 'viem';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import type { Config } from '../src/config';
import { createVault, createWallet } from '../src/custody/service';
import { derivationPath } from '../src/keys/derivation';
import { keyServiceFor } from '../src/keys/service';
import { verifyLedger } from '../src/ledger/invariants';
import { ledgerProjections } from '../src/registries';
import { createOrganization } from '../src/organizations/service';
import { prefixedId } from '../src/shared/ids';
import { anvilTokenBalance, type Anvil } from '../test/support/anvil';

/** Addresses per wallet: deposit wallets of an exchange or a payments platform hold many receive addresses. */
const ADDRESSES_PER_WALLET = 100;
/** Which addresses hold funds: most deposit addresses sit empty once swept, a share holds ether, fewer the token. */
const ETHER_EVERY = 5;
const TOKEN_EVERY = 10;
/** JSON-RPC calls per batch while funding anvil. */
const FUNDING_BATCH = 1000;

export interface ReconciliationFixture {
  organizationId: string;
  addresses: number;
  funded: { ether: number; token: number };
  /** The block the scanner's cursor is at (anvil's tip once funded). */
  pin: { height: number; hash: string };
}

/** One funded (address, asset): what the chain holds and the ledger booked. */
interface Holding {
  addressId: string;
  walletId: string;
  address: string;
  assetId: 'ETH' | 'USDC_ETH';
  amount: bigint;
}

/**
 * An organization's sandbox Ethereum wallets with `count` custody addresses in PostgreSQL, a share of
 * them holding ether and the token on anvil and, by the same amounts, in the ledger, and the scanner's
 * cursor at anvil's tip. The first wallet and its primary address are made by the service
 * (createWallet); the rest are copies of their rows with addresses of their own, inserted set-wise, as
 * are the ledger's postings (one balanced `opening_balance` per holding: the address's available
 * account against the organization's opening balances), their accounts and the balance projections.
 * `verifyLedger` must accept the result. The addresses are not derived from the organization's keys
 * (100,000 derivations would take minutes and the pass never derives): they are hashes of their index.
 */
export async function reconciliationFixture(em: EntityManager, config: Config, anvil: Anvil, token: Hex, count: number): Promise<ReconciliationFixture> {
  const organization = createOrganization(em, 'Benchmark');
  await em.flush();
  const tenant = { organizationId: organization.id, environment: 'sandbox' as const };
  const vault = createVault(em, tenant, { name: 'Deposits' });
  await em.flush();
  const { wallet: template, primary } = await createWallet(em, keyServiceFor(config), tenant, { name: 'Deposits', chain: 'ethereum', vault_id: vault.id, wallet_type: 'hot' });
  await em.flush();

  const wallets = Array.from({ length: Math.ceil(count / ADDRESSES_PER_WALLET) }, (_, index) => ({ id: index === 0 ? template.id : randomUUID(), account: template.accountIndex + index }));
  const rows = { id: [] as string[], walletId: [] as string[], address: [] as string[], index: [] as number[], path: [] as string[] };
  const holdings: Holding[] = [];
  for (let n = 0; n < count; n++) {
    const wallet = wallets[Math.floor(n / ADDRESSES_PER_WALLET)]!;
    const index = n % ADDRESSES_PER_WALLET;
    const addressId = n === 0 ? primary.id : randomUUID();
    const address = n === 0 ? primary.address : getAddress(`0x${keccak256(toHex(`reconciliation benchmark ${n}`)).slice(-40)}`);
    if (n > 0) {
      rows.id.push(addressId);
      rows.walletId.push(wallet.id);
      rows.address.push(address);
      rows.index.push(index);
      rows.path.push(derivationPath({ chain: 'ethereum', testnet: true, coinType: template.coinType, format: primary.format, account: wallet.account, index }));
    }
    if (n % ETHER_EVERY === 0) holdings.push({ addressId, walletId: wallet.id, address, assetId: 'ETH', amount: BigInt(n % 997 + 1) * 10n ** 15n });
    if (n % TOKEN_EVERY === 0) holdings.push({ addressId, walletId: wallet.id, address, assetId: 'USDC_ETH', amount: BigInt(n % 991 + 1) * 10n ** 6n });
  }

  const client = new pg.Client({ connectionString: config.DATABASE_URL });
  await client.connect();
  try {
    await client.query('begin');
    await client.query(
      `insert into wallets (id, organization_id, vault_id, environment, name, chain, network, wallet_type, customer_ref_id, metadata, account_index, coin_type, next_address_index, created_at, updated_at)
       select w.id, t.organization_id, t.vault_id, t.environment, t.name, t.chain, t.network, t.wallet_type, null, t.metadata, w.account, t.coin_type, $3, now(), now()
         from wallets t, unnest($1::uuid[], $2::int[]) as w(id, account) where t.id = $4 and w.id <> t.id`,
      [wallets.map((wallet) => wallet.id), wallets.map((wallet) => wallet.account), ADDRESSES_PER_WALLET, template.id],
    );
    await client.query(`update wallets set next_address_index = $1 where id = $2`, [ADDRESSES_PER_WALLET, template.id]);
    await client.query(`update custody_account_counters set next_account = $1 where organization_id = $2 and chain = 'ethereum'`, [template.accountIndex + wallets.length, organization.id]);
    await client.query(
      `insert into addresses (id, organization_id, wallet_id, chain, network, address, format, address_index, derivation_path, is_primary, label, created_at)
       select a.id, p.organization_id, a.wallet_id, p.chain, p.network, a.address, p.format, a.index, a.path, a.index = 0, '', now()
         from addresses p, unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::text[]) as a(id, wallet_id, address, index, path) where p.id = $6`,
      [rows.id, rows.walletId, rows.address, rows.index, rows.path, primary.id],
    );
    await bookHoldings(client, tenant.organizationId, holdings);
    await scanningHistory(client, organization.id);
    // Statistics for the plans of the ledger's deferred balance check, which runs once per line at commit: without them it scans every line for each.
    await client.query('analyze ledger_lines, ledger_postings, ledger_accounts');
    await client.query('commit');
    await client.query('vacuum analyze wallets, addresses, address_balances, wallet_balances, ledger_accounts, ledger_postings, ledger_lines, incoming_transfers, outgoing_transfers');
  } finally {
    await client.end();
  }
  const breaks = await verifyLedger(em, ledgerProjections, organization.id);
  if (breaks.length) throw new Error(`the fixture's ledger does not verify: ${JSON.stringify(breaks.slice(0, 3))}`);

  await fundOnAnvil(anvil, token, holdings);
  // The funding is anvil's state now; a block on it makes it the state at a block a pass can pin.
  await anvil.call('anvil_mine', ['0x1']);
  const tip = (await anvil.call('eth_getBlockByNumber', ['latest', false])) as { number: Hex; hash: string };
  const pin = { height: Number(tip.number), hash: tip.hash };
  await em.execute(
    `insert into chain_scan_cursors (chain, environment, network, height, hash, resyncs, updated_at) values ('ethereum', 'sandbox', ?, ?, ?, 0, now())
     on conflict (chain, environment) do update set height = excluded.height, hash = excluded.hash, updated_at = now()`,
    [`evm-rpc:chain-id:${anvil.chainId}`, pin.height, pin.hash],
  );
  return {
    organizationId: organization.id,
    addresses: count,
    funded: { ether: holdings.filter((holding) => holding.assetId === 'ETH').length, token: holdings.filter((holding) => holding.assetId === 'USDC_ETH').length },
    pin,
  };
}

/**
 * The holdings as the ledger books them (src/custody/journal.ts postCustodyEntry, set-wise): per holding a
 * posting of kind `opening_balance`, its available account credited and the organization's opening
 * balances debited, and the address and wallet balance rows. The deferred balance check runs at commit.
 */
async function bookHoldings(client: pg.Client, organizationId: string, holdings: Holding[]): Promise<void> {
  await client.query(
    `create temp table holdings on commit drop as
     select * from unnest($1::text[], $2::text[], $3::text[], $4::numeric[], $5::text[]) as h(address_id, wallet_id, asset_id, amount, posting_id)`,
    [holdings.map((holding) => holding.addressId), holdings.map((holding) => holding.walletId), holdings.map((holding) => holding.assetId), holdings.map((holding) => holding.amount.toString()), holdings.map(() => prefixedId('lpst'))],
  );
  await client.query(
    `insert into ledger_accounts (key, environment, organization_id, asset, type, holder_id, created_at)
     select 'custody:' || address_id || ':' || asset_id || ':available', 'sandbox'::environment, $1, asset_id, 'custody_available', address_id, now() from holdings
     union all
     select distinct 'opening_balances:' || $1 || ':sandbox:' || asset_id, 'sandbox'::environment, $1, asset_id, 'opening_balances', null, now() from holdings`,
    [organizationId],
  );
  await client.query(
    `insert into ledger_postings (id, key, environment, organization_id, kind, reference_type, reference_id, created_at)
     select posting_id, 'custody/' || wallet_id || '/' || asset_id || '/opening_balance/benchmark_funding/' || address_id, 'sandbox'::environment, $1, 'opening_balance', 'benchmark_funding', address_id, now()
       from holdings`,
    [organizationId],
  );
  await client.query(
    `insert into ledger_lines (posting_id, account_key, amount)
     select posting_id, 'custody:' || address_id || ':' || asset_id || ':available', amount from holdings
     union all
     select posting_id, 'opening_balances:' || $1 || ':sandbox:' || asset_id, -amount from holdings`,
    [organizationId],
  );
  await client.query(
    `insert into address_balances (address_id, asset_id, wallet_id, balance, locked, pending, updated_at)
     select address_id::uuid, asset_id, wallet_id::uuid, amount, 0, 0, now() from holdings`,
  );
  await client.query(
    `insert into wallet_balances (wallet_id, asset_id, balance, locked, pending, updated_at)
     select wallet_id::uuid, asset_id, sum(amount), 0, 0, now() from holdings group by 1, 2`,
  );
}

/**
 * What scanning recorded before the pinned block, which the pass's ledger view reads past: every address
 * received one ether deposit (confirmed at block 1), and every address not holding ether now was swept by a
 * send of the platform's (mined at block 2). Neither changes a figure at the pin (settled, below it): they
 * are the history a pass's statements search through. The ledger's postings for them are left out: the
 * pass reads the balance projections, never the lines.
 */
async function scanningHistory(client: pg.Client, organizationId: string): Promise<void> {
  const hash = (seed: string) => `'0x' || md5(${seed}) || md5('x' || ${seed})`;
  await client.query(
    `insert into incoming_transfers (id, organization_id, environment, wallet_id, address_id, chain, network, asset_id, amount, txid, position, to_address, from_address,
                                     block_height, block_hash, confirmations, required_confirmations, status, confirmed_at, created_at, updated_at, reorganisations)
     select gen_random_uuid(), a.organization_id, 'sandbox', a.wallet_id, a.id, a.chain, a.network, 'ETH', 10000000000000000, ${hash("'deposit' || a.id")}, '0', a.address, null,
            1, ${hash("'block 1'")}, 10, 2, 'confirmed', now(), now(), now(), 0
       from addresses a where a.organization_id = $1`,
    [organizationId],
  );
  await client.query(
    `insert into outgoing_transfers (id, organization_id, environment, wallet_id, address_id, chain, network, asset_id, amount, fee, txid, position, from_address, to_address,
                                     block_height, block_hash, transaction_id, unexpected, created_at, reorganisations)
     select gen_random_uuid(), a.organization_id, 'sandbox', a.wallet_id, a.id, a.chain, a.network, 'ETH', 10000000000000000 - 21000000000000, 21000000000000, ${hash("'sweep' || a.id")}, '0',
            a.address, '0x1111111111111111111111111111111111111111', 2, ${hash("'block 2'")}, gen_random_uuid(), false, now(), 0
       from addresses a where a.organization_id = $1 and not exists (select 1 from holdings h where h.address_id = a.id::text and h.asset_id = 'ETH')`,
    [organizationId],
  );
}

/**
 * The same holdings on anvil: ether by anvil_setBalance, the token by writing its balance slot
 * (OpenZeppelin's ERC20 keeps `_balances` at slot 0), in JSON-RPC batches; one holding is read back
 * through balanceOf to prove the slot.
 */
async function fundOnAnvil(anvil: Anvil, token: Hex, holdings: Holding[]): Promise<void> {
  const calls = holdings.map((holding) =>
    holding.assetId === 'ETH'
      ? { method: 'anvil_setBalance', params: [holding.address, toHex(holding.amount)] }
      : {
          method: 'anvil_setStorageAt',
          params: [token, keccak256(encodeAbiParameters(parseAbiParameters('address, uint256'), [holding.address as Hex, 0n])), toHex(holding.amount, { size: 32 })],
        },
  );
  for (let start = 0; start < calls.length; start += FUNDING_BATCH) {
    const batch = calls.slice(start, start + FUNDING_BATCH).map((call, offset) => ({ jsonrpc: '2.0', id: start + offset, ...call }));
    const response = await fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(batch) });
    const answers = (await response.json()) as { error?: unknown }[];
    const refused = answers.find((answer) => answer.error);
    if (refused) throw new Error(`anvil refused a funding call: ${JSON.stringify(refused.error)}`);
  }
  const sample = holdings.find((holding) => holding.assetId === 'USDC_ETH')!;
  const read = await anvilTokenBalance(anvil, token, sample.address);
  if (read !== sample.amount) throw new Error(`the token's balance slot is not where the benchmark wrote: ${sample.address} holds ${read}, not ${sample.amount}`);
}
