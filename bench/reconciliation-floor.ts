import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { decodeFunctionResult, encodeFunctionData, erc20Abi, getAddress, multicall3Abi, type Hex } from 'viem';
import { MULTICALL3_ADDRESS } from '../src/chains/providers/evm-balances';
import { timed } from './support';

/** What the parent (bench/reconciliation.ts) asks of one measurement. */
export interface FloorRequest {
  databaseUrl: string;
  anvilUrl: string;
  token: Hex;
  pin: { height: number; hash: string };
  pageSize: number;
}

export interface FloorResult {
  holders: number;
  pages: number;
  seconds: number;
  node_wait_s: number;
  db_wait_s: number;
  /** This process's CPU (user + system), in ms. */
  cpu_ms: number;
  /** Positions where the chain and the ledger's balance row differ: none, or the fixture is wrong. */
  differing: number;
}

/** Multicall3's getEthBalance: an address's ether read inside an aggregate3, beside the token's balanceOf. */
const getEthBalanceAbi = [{ type: 'function', name: 'getEthBalance', stateMutability: 'view', inputs: [{ name: 'addr', type: 'address' }], outputs: [{ name: 'balance', type: 'uint256' }] }] as const;

/**
 * The floor of a reconciliation pass, in a process of its own: what a pass over the same holders at
 * the same page size must do at least. Per page, one statement reads the page of custody addresses
 * (the chain's sandbox wallets', in id order after the cursor) with their balance rows; one
 * Multicall3 aggregate3 eth_call, pinned by the block's hash (EIP-1898), reads every address's ether
 * (getEthBalance) and token (balanceOf) at that block; the two are compared; and the cursor is
 * committed (a pass resumes from it), on a pass row of the floor's own. Nothing else: no snapshot
 * transaction, no in-flight sends, deposits or drifts read, no ORM.
 */
async function floorPass(request: FloorRequest): Promise<FloorResult> {
  const client = new pg.Client({ connectionString: request.databaseUrl });
  await client.connect();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  let nodeWait = 0;
  let dbWait = 0;
  let cursor = '00000000-0000-0000-0000-000000000000';
  let holders = 0;
  let pages = 0;
  let differing = 0;
  try {
    await client.query(
      `insert into ledger_reconciliation_passes (chain, environment, scope, cursor, started_at, holders_compared) values ('ethereum', 'sandbox', 'benchmark-floor', null, now(), 0)
       on conflict (chain, environment, scope) do update set cursor = null, holders_compared = 0, started_at = now()`,
    );
    for (;;) {
      const { rows } = await timed(
        () =>
          client.query<{ id: string; address: string; asset_id: string | null; balance: string | null }>(
            `select a.id, a.address, b.asset_id, b.balance::text
               from (select a.id, a.address from addresses a join wallets w on w.id = a.wallet_id
                      where w.chain = 'ethereum' and w.environment = 'sandbox' and a.id > $1 order by a.id limit $2) a
               left join address_balances b on b.address_id = a.id order by a.id`,
            [cursor, request.pageSize],
          ),
        (ms) => (dbWait += ms),
      );
      const page = [...new Map(rows.map((row) => [row.id, row.address])).entries()];
      if (page.length === 0) break;
      const booked = new Map(rows.filter((row) => row.asset_id).map((row) => [`${row.id}:${row.asset_id}`, BigInt(row.balance!)]));
      const calls = page.flatMap(([, address]) => [
        { target: MULTICALL3_ADDRESS as Hex, allowFailure: false, callData: encodeFunctionData({ abi: getEthBalanceAbi, functionName: 'getEthBalance', args: [getAddress(address)] }) },
        { target: request.token, allowFailure: false, callData: encodeFunctionData({ abi: erc20Abi, functionName: 'balanceOf', args: [getAddress(address)] }) },
      ]);
      const data = encodeFunctionData({ abi: multicall3Abi, functionName: 'aggregate3', args: [calls] });
      const answer = await timed(() => rpc(request.anvilUrl, 'eth_call', [{ to: MULTICALL3_ADDRESS, data }, { blockHash: request.pin.hash, requireCanonical: true }]), (ms) => (nodeWait += ms));
      const results = decodeFunctionResult({ abi: multicall3Abi, functionName: 'aggregate3', data: answer as Hex });
      page.forEach(([id], index) => {
        const ether = decodeFunctionResult({ abi: getEthBalanceAbi, functionName: 'getEthBalance', data: results[index * 2]!.returnData });
        const token = decodeFunctionResult({ abi: erc20Abi, functionName: 'balanceOf', data: results[index * 2 + 1]!.returnData });
        if (ether !== (booked.get(`${id}:ETH`) ?? 0n)) differing++;
        if (token !== (booked.get(`${id}:USDC_ETH`) ?? 0n)) differing++;
      });
      cursor = page.at(-1)![0];
      await timed(
        () =>
          client.query(`update ledger_reconciliation_passes set cursor = $1, holders_compared = holders_compared + $2 where chain = 'ethereum' and environment = 'sandbox' and scope = 'benchmark-floor'`, [
            cursor,
            page.length,
          ]),
        (ms) => (dbWait += ms),
      );
      holders += page.length;
      pages++;
      if (page.length < request.pageSize) break;
    }
  } finally {
    await client.end();
  }
  const cpu = process.cpuUsage(cpuBefore);
  const ms = (value: number) => Math.round(value) / 1000;
  return { holders, pages, seconds: ms(performance.now() - started), node_wait_s: ms(nodeWait), db_wait_s: ms(dbWait), cpu_ms: Math.round((cpu.user + cpu.system) / 1000), differing };
}

let rpcId = 0;
async function rpc(url: string, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params }) });
  const body = (await response.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

// The parent sends one request, reads the result (and this process's CPU) and then ends the process.
process.once('message', (request: FloorRequest) => {
  floorPass(request).then(
    (result) => process.send!(result),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
process.send!('ready');
