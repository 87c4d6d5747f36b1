import { parseEther, type Hex } from 'viem';
import { ChainNodes } from '../../../src/chains/nodes';
import { loadConfig } from '../../../src/config';
import { type Orm } from '../../../src/db/orm';
import { createLogger } from '../../../src/logger';
import { compareLedgerWithChain } from '../../../src/monitoring/ledger-check';
import { anvilEthBalance, anvilReceipt, receiptFee } from '../anvil';
import { eventually } from '../eventually';
import { ChaosClient, Operation } from './client';
import { Chain, ORGANIZATIONS, OrganizationName } from './model';
import { walletEth } from './setup';

/**
 * On chain: with no block mined any more, scanning catches up with the tip; then each wallet's ledger is its chain balance,
 * and what the API shows for it is, from the load's own record, what was deposited to it less what its accepted sends
 * took (the amounts the load asked for, and the network fees the chain charged them: anvil's receipts of the sends'
 * transactions, each checked to go from the wallet to the outside address with that amount); the outside address holds
 * exactly the amounts the load sent.
 */
export async function checkChain(
  orm: Orm,
  client: ChaosClient,
  chain: Chain,
  env: NodeJS.ProcessEnv,
  settleDeadline: number,
  runs: Operation[],
  sends: Operation[],
  violations: string[],
  report: string[],
): Promise<{ sweepsOnChain: number }> {
  const sql = <T>(query: string, params: unknown[] = []) => orm.em.fork().getConnection().execute<T[]>(query, params);
  clearInterval(chain.mining);
  const tip = Number(await chain.anvil.call('eth_blockNumber'));
  const scanned = await eventually(
    async () => ((Number((await sql<{ n: string }>(`select coalesce(max(height), 0) as n from chain_scan_cursors where chain = 'ethereum' and environment = 'sandbox'`))[0]!.n)) >= tip ? true : undefined),
    'scanning caught up with the tip',
    // Its own minute once mining stops: under the suite's load the scan runs a few blocks behind a block a second.
    Math.max(60_000, settleDeadline - Date.now()),
    500,
  ).catch(() => false);
  if (!scanned) violations.push(`the chain scan did not reach the tip ${tip}`);
  const config = loadConfig(env);
  const provider = await new ChainNodes(config, createLogger('silent'), orm).provider('ethereum', 'sandbox');
  const ledger = await compareLedgerWithChain(orm.em.fork(), provider, { chain: 'ethereum', environment: 'sandbox', assetIds: ['ETH'] });
  for (const mismatch of ledger.mismatches) violations.push(`wallet ledger differs from the chain: ${JSON.stringify(mismatch, (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))}`);
  const { gained: swept, sweepsOnChain } = await checkSweeps(client, chain, runs, violations, report);
  let sentTotal = 0n;
  const readDeadline = Date.now() + 60_000;
  for (const [as, wallet] of Object.entries(chain.wallets) as [OrganizationName, { id: string; address: Hex }][]) {
    let amounts = 0n;
    let fees = 0n;
    for (const send of sends.filter((each) => each.as === as)) {
      const amount = parseEther((send.body as { amount: string }).amount);
      const hash = (await client.read(as, `/v1/transactions/${send.id}`, readDeadline))?.body.tx_hash as Hex | null | undefined;
      const sent = hash ? ((await chain.anvil.call('eth_getTransactionByHash', [hash])) as { from: string; to: string; value: Hex } | null) : null;
      if (!sent || sent.from.toLowerCase() !== wallet.address.toLowerCase() || sent.to.toLowerCase() !== chain.outside.toLowerCase() || BigInt(sent.value) !== amount) {
        violations.push(`send ${send.id} of ${as}: its transaction ${hash} is not ${amount} wei from its wallet to the outside address on the chain`);
        continue;
      }
      const receipt = await anvilReceipt(chain.anvil, hash!);
      if (receipt.status !== '0x1') violations.push(`send ${send.id} of ${as}: its transaction ${hash} reverted`);
      amounts += amount;
      fees += receiptFee(receipt);
    }
    sentTotal += amounts;
    const deposited = chain.deposited.get(wallet.id) ?? 0n;
    const expected = deposited + swept[as] - amounts - fees;
    const shown = await walletEth(client, as, wallet.id, readDeadline);
    report.push(`money ETH (wei), ${as}'s wallet: deposited ${deposited} + swept in ${swept[as]} - sent ${amounts} - fees ${fees} = ${expected}; the API shows ${shown}`);
    if (shown !== expected) violations.push(`money ETH of ${as}'s wallet ${wallet.id}: expected ${expected}, the API shows ${shown}`);
  }
  const outsideHolds = await anvilEthBalance(chain.anvil, chain.outside);
  report.push(`the outside address holds ${outsideHolds}; ${ledger.wallets} wallet ledgers compared with the chain, ${ledger.mismatches.length} differ`);
  if (outsideHolds !== sentTotal) violations.push(`money ETH: the outside address holds ${outsideHolds}, the accepted sends sent ${sentTotal}`);
  return { sweepsOnChain };
}
/**
 * Sweeps, from what the chain says of each sweep's transaction (its value and the fee it was charged, gas used times
 * the effective gas price), per organization: the source wallet holds what was deposited to it less the values and the
 * fees of its sweeps; each run swept (amount_swept) what its transactions delivered. Returns the wei each organization's
 * main wallet gained from its sweeps, and how many sweep transactions the chain holds, each from a source to its main wallet.
 */
async function checkSweeps(
  client: ChaosClient,
  chain: Chain,
  runs: Operation[],
  violations: string[],
  report: string[],
): Promise<{ gained: Record<OrganizationName, bigint>; sweepsOnChain: number }> {
  const gained = Object.fromEntries(ORGANIZATIONS.map((name) => [name, 0n])) as Record<OrganizationName, bigint>;
  const readDeadline = Date.now() + 60_000;
  let sweepsOnChain = 0;
  for (const as of ORGANIZATIONS) {
    const source = chain.sweepSources[as]!;
    const destination = chain.wallets[as]!.address.toLowerCase();
    let fees = 0n;
    let count = 0;
    for (const run of runs.filter((each) => each.as === as)) {
      const shown = (await client.read(as, `/v1/consolidation/runs/${run.id}`, readDeadline))?.body;
      const sweeps = ((await client.read(as, `/v1/consolidation/runs/${run.id}/sweeps?limit=100`, readDeadline))?.body.data ?? []) as { id: string; status: string; tx_hash: string | null }[];
      let delivered = 0n;
      for (const sweep of sweeps.filter((each) => each.status === 'confirmed')) {
        const sent = (await chain.anvil.call('eth_getTransactionByHash', [sweep.tx_hash])) as { from: string; to: string; value: Hex } | null;
        if (!sent || !source.addresses.some((address) => address.toLowerCase() === sent.from.toLowerCase()) || sent.to.toLowerCase() !== destination) {
          violations.push(`sweep ${sweep.id} of ${as}: its transaction ${sweep.tx_hash} is not from its source to its main wallet on the chain`);
          continue;
        }
        const receipt = await anvilReceipt(chain.anvil, sweep.tx_hash!);
        if (receipt.status !== '0x1') violations.push(`sweep ${sweep.id} of ${as}: its transaction ${sweep.tx_hash} reverted`);
        delivered += BigInt(sent.value);
        fees += receiptFee(receipt);
        count += 1;
      }
      gained[as] += delivered;
      const reported = (shown?.per_asset_totals as { amount_swept: string }[] | undefined)?.reduce((sum, total) => sum + parseEther(total.amount_swept), 0n) ?? 0n;
      if (reported !== delivered) violations.push(`consolidation run ${run.id} of ${as}: amount_swept ${reported} wei, its transactions delivered ${delivered}`);
    }
    const deposited = chain.deposited.get(source.walletId) ?? 0n;
    const expected = deposited - gained[as] - fees;
    const shown = await walletEth(client, as, source.walletId, readDeadline);
    report.push(`sweeps of ${as}: ${count} confirmed in ${runs.filter((each) => each.as === as).length} runs; source wallet: deposited ${deposited} - swept ${gained[as]} - fees ${fees} = ${expected}, the API shows ${shown}`);
    if (shown !== expected) violations.push(`money ETH of ${as}'s sweep source ${source.walletId}: expected ${expected}, the API shows ${shown}`);
    sweepsOnChain += count;
  }
  return { gained, sweepsOnChain };
}
