import { randomUUID } from 'node:crypto';
import { parseEther, type Hex } from 'viem';
import { anvilFunder, anvilReceipt } from '../anvil';
import { eventually } from '../eventually';
import { ChaosClient } from './client';
import { Chain, ORGANIZATIONS, OrganizationName, sleep } from './model';

async function setUp(client: ChaosClient, as: OrganizationName, route: string, body: unknown, deadline: number): Promise<Record<string, any>> {
  const answer = await client.send({ as, method: 'POST', route, body, idempotencyKey: randomUUID(), attempts: 0 }, deadline);
  if (!answer || answer.status >= 300) throw new Error(`POST ${route} of ${as} failed: ${JSON.stringify(answer)}`);
  return answer.body;
}

/**
 * A block a second on the Tron devnet (which mines none of its own here) through the sandbox's mining route, one call
 * at a time, from the load's start until the end of the checks: the confirmations of the trips' deposits.
 */
export function mineTron(client: ChaosClient): { stop: () => Promise<void> } {
  let mining = true;
  const loop = (async () => {
    while (mining) {
      await client.send({ as: ORGANIZATIONS[0], method: 'POST', route: '/v1/sandbox/chains/tron/blocks', body: { count: 1 }, idempotencyKey: randomUUID(), attempts: 0 }, Date.now() + 30_000);
      await sleep(1000);
    }
  })();
  return {
    stop: async () => {
      mining = false;
      await loop;
    },
  };
}

/** A vault of `as` with an Ethereum wallet: their ids and the wallet's primary address. */
async function openVault(client: ChaosClient, as: OrganizationName, name: string, deadline: number): Promise<{ vaultId: string; walletId: string; address: Hex }> {
  const vault = await setUp(client, as, '/v1/vaults', { name }, deadline);
  const wallet = await setUp(client, as, '/v1/wallets', { name, chain: 'ethereum', vault_id: vault.id, wallet_type: 'hot' }, deadline);
  return { vaultId: vault.id as string, walletId: wallet.id as string, address: wallet.primary_address.address as Hex };
}

/**
 * An Ethereum wallet of `as`, with 100 ETH deposited and confirmed; and its sweep source: a vault of its own with a
 * wallet of two addresses, and a manual rule sweeping their ETH to the main wallet's vault (each address paying its own fee).
 */
export async function openWallet(client: ChaosClient, chain: Chain, as: OrganizationName, setupDeadline: number): Promise<void> {
  const main = await openVault(client, as, 'Chaos', setupDeadline);
  const opened = { id: main.walletId, address: main.address };
  chain.wallets[as] = opened;
  const source = await openVault(client, as, 'Chaos sweeps', setupDeadline);
  const second = await setUp(client, as, `/v1/wallets/${source.walletId}/addresses`, { label: 'second' }, setupDeadline);
  const rule = await setUp(
    client,
    as,
    '/v1/consolidation/rules',
    { vault_id: source.vaultId, chain: 'ethereum', destination_type: 'vault', destination_vault_id: main.vaultId, gas_source: 'wallet', trigger_type: 'manual', assets: [{ is_native: true }] },
    setupDeadline,
  );
  chain.sweepSources[as] = { ruleId: rule.id as string, walletId: source.walletId, addresses: [source.address, second.address as Hex], busy: false, booked: true };
  await deposit(chain, opened, parseEther('100'));
  for (const address of chain.sweepSources[as]!.addresses) await deposit(chain, { id: source.walletId, address }, parseEther('0.05'));
  await eventually(
    async () =>
      ((await walletEth(client, as, opened.id, setupDeadline)) ?? 0n) > 0n && (await walletEth(client, as, source.walletId, setupDeadline)) === parseEther('0.1') ? true : undefined,
    'the first deposits confirmed',
    120_000,
    500,
  );
}

/** A wallet's ETH balance as the API shows it. */
export async function walletEth(client: ChaosClient, as: OrganizationName, walletId: string, deadline: number): Promise<bigint | undefined> {
  const balances = (await client.read(as, `/v1/wallets/${walletId}/balances`, deadline))?.body.data as { asset_id: string; balance: string }[] | undefined;
  const eth = balances?.find((row) => row.asset_id === 'ETH');
  return eth ? BigInt(eth.balance) : undefined;
}

/** A deposit from anvil's dev account, one at a time (its nonce), counted once its receipt says it was mined and succeeded. */
export function deposit(chain: Chain, wallet: { id: string; address: Hex }, wei: bigint): Promise<void> {
  chain.depositing = chain.depositing.then(async () => {
    const receipt = await anvilReceipt(chain.anvil, await anvilFunder(chain.anvil).sendTransaction({ to: wallet.address, value: wei }));
    if (receipt.status !== '0x1') throw new Error(`the deposit of ${wei} wei to ${wallet.address} reverted`);
    chain.deposited.set(wallet.id, (chain.deposited.get(wallet.id) ?? 0n) + wei);
  });
  return chain.depositing;
}
