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
 * and what the API shows for it is what was deposited to it less what its confirmed sends took (amounts and their network
 * fees, which the chain sets: read from the sends); the outside address holds exactly what the sends sent.
 */
export async function checkChain(
  orm: Orm,
  client: ChaosClient,
  chain: Chain,
  env: NodeJS.ProcessEnv,
  settleDeadline: number,
  runs: Operation[],
  violations: string[],
  report: string[],
): Promise<void> {
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
  const swept = await checkSweeps(client, chain, runs, violations, report);
  let sentTotal = 0n;
  for (const [as, wallet] of Object.entries(chain.wallets) as [OrganizationName, { id: string; address: Hex }][]) {
    const [sent] = await sql<{ amounts: string; fees: string }>(
      `select coalesce(sum(recipient_amount), 0) as amounts, coalesce(sum(fee), 0) as fees from transactions where status = 'confirmed' and wallet_id = ?`,
      [wallet.id],
    );
    sentTotal += BigInt(sent!.amounts);
    const deposited = chain.deposited.get(wallet.id) ?? 0n;
    const expected = deposited + swept[as] - BigInt(sent!.amounts) - BigInt(sent!.fees);
    const shown = await walletEth(client, as, wallet.id, Date.now() + 60_000);
    report.push(`money ETH (wei), ${as}'s wallet: deposited ${deposited} + swept in ${swept[as]} - sent ${sent!.amounts} - fees ${sent!.fees} = ${expected}; the API shows ${shown}`);
    if (shown !== expected) violations.push(`money ETH of ${as}'s wallet ${wallet.id}: expected ${expected}, the API shows ${shown}`);
  }
  const outsideHolds = await anvilEthBalance(chain.anvil, chain.outside);
  report.push(`the outside address holds ${outsideHolds}; ${ledger.wallets} wallet ledgers compared with the chain, ${ledger.mismatches.length} differ`);
  if (outsideHolds !== sentTotal) violations.push(`money ETH: the outside address holds ${outsideHolds}, the confirmed sends sent ${sentTotal}`);
}
/**
 * Sweeps, from what the chain says of each sweep's transaction (its value and the fee it was charged, gas used times
 * the effective gas price), per organization: the source wallet holds what was deposited to it less the values and the
 * fees of its sweeps; each run swept (amount_swept) what its transactions delivered. Returns the wei each organization's
 * main wallet gained from its sweeps.
 */
async function checkSweeps(client: ChaosClient, chain: Chain, runs: Operation[], violations: string[], report: string[]): Promise<Record<OrganizationName, bigint>> {
  const gained = Object.fromEntries(ORGANIZATIONS.map((name) => [name, 0n])) as Record<OrganizationName, bigint>;
  const readDeadline = Date.now() + 60_000;
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
  }
  return gained;
}

/**
 * Payouts, in the trips' asset (USDT on Tron, base units): what the load deposited is what the desk's
 * wallet holds (nothing refunded or swept here), and it is what the successful trips took (the
 * quoted amount: fees and what was converted), plus what trips credited back to the payer's usdt
 * balance, plus what the trips not (yet) successful received; the rails paid out exactly the quoted
 * fiat of the successful trips.
 */
export async function checkPayoutMoney(
  sql: <T>(query: string, params?: unknown[]) => Promise<T[]>,
  deposits: Operation[],
  violations: string[],
  report: string[],
): Promise<void> {
  const deposited = deposits.reduce((sum, each) => sum + BigInt(each.answer!.body.amountRaw as string), 0n);
  const [desk] = await sql<{ total: string }>(
    `select coalesce(sum(balance + pending), 0) as total from wallet_balances
      where asset_id = 'USDT_TRX' and wallet_id in (select a.wallet_id from addresses a join payout_trips t on t.deposit_address_record_id = a.id)`,
  );
  const [trips] = await sql<{ paid_out: string; fees: string; credited: string; unfinished: string; successes: string; total: string }>(
    `select coalesce(sum(q.from_amount) filter (where t.status = 'success'), 0) as paid_out,
            coalesce(sum((select sum((fee->>'amount_raw')::numeric) from jsonb_array_elements(q.fees) fee)) filter (where t.status = 'success'), 0) as fees,
            coalesce(sum(t.credited_amount), 0) as credited,
            coalesce(sum((select coalesce(sum(i.amount), 0) from incoming_transfers i where i.address_id = t.deposit_address_record_id) - coalesce(t.credited_amount, 0))
                     filter (where t.status <> 'success'), 0) as unfinished,
            count(*) filter (where t.status = 'success') as successes, count(*) as total
       from payout_trips t join payout_quotes q on q.id = t.quote_id`,
  );
  const [balances] = await sql<{ total: string }>(`select coalesce(sum(available + reserved), 0) as total from company_balances where currency = 'usdt'`);
  const fiat = await sql<{ currency: string; paid: string; n: string }>(
    `select currency, sum(amount) as paid, count(*) as n from sandbox_rail_instructions where paid_at is not null group by currency order by currency`,
  );
  const accounted = BigInt(trips!.paid_out) + BigInt(trips!.credited) + BigInt(trips!.unfinished);
  report.push(
    `payouts: ${trips!.total} trips, ${trips!.successes} success`,
    `money USDT (Tron, base units): deposited ${deposited} = the desk's wallet ${desk!.total}; = paid out ${trips!.paid_out} (fees ${trips!.fees}) + credited to balances ${trips!.credited} + in trips not successful ${trips!.unfinished} (${accounted}); ` +
      `fiat paid out (minor units): ${fiat.map((row) => `${row.currency} ${row.paid} in ${row.n} payouts`).join(', ') || 'none'}`,
  );
  if (deposited !== BigInt(desk!.total)) violations.push(`money USDT: deposited ${deposited}, the desk's wallet holds ${desk!.total}`);
  if (deposited !== accounted) violations.push(`money USDT: deposited ${deposited}, the trips account for ${accounted}`);
  if (BigInt(balances!.total) !== BigInt(trips!.credited)) violations.push(`money USDT: usdt balances hold ${balances!.total}, the trips credited ${trips!.credited}`);
}
